"""Invokes written in a processor's terms: several prompts with their images, padded into one encoding."""

from __future__ import annotations

from typing import Any

from ._cache import given_cache


def padded_processor_invoke(model: Any, inputs: tuple, kwargs: dict, generating: bool) -> tuple:
    """An invoke of several prompts with images, as the processor's padded encoding in the model's terms.

    ``model.trace(["<image>a cat", "no image here"], images=[[cat], []])``:
    nnsight hands such an invoke to the processor without ``padding``, which
    fails on prompts of different lengths; here the processor pads them, so
    one invoke may mix prompts with and without images and several images per
    prompt (images nested one list per prompt, as every processor accepts).
    A trace pads on the right, so every row's tokens keep the positions they
    have alone (a wrapper places its own, 3D ones included, from there); a
    ``generate`` pads on the tokenizer's side, as generation must continue
    each row from its last token. Any other invoke comes back unchanged.
    """
    processor = getattr(model, "processor", None)
    if processor is None:
        return inputs, kwargs
    from nnsight.modeling.processing import PROCESSOR_KEYS, PROCESSOR_MEDIA_KEYS

    if not set(kwargs) & PROCESSOR_MEDIA_KEYS:
        return inputs, kwargs
    text = inputs[0] if inputs else kwargs.get("text")
    if not isinstance(text, (list, tuple)) or len(text) < 2 or not all(isinstance(prompt, str) for prompt in text):
        return inputs, kwargs
    call = {key: value for key, value in kwargs.items() if key in PROCESSOR_KEYS}
    call["text"] = list(text)
    forward = {key: value for key, value in kwargs.items() if key not in PROCESSOR_KEYS}
    side = {} if generating else {"padding_side": "right"}
    encoding = processor(**call, padding=True, return_tensors="pt", **side)
    return (), {**dict(encoding), **forward}


def in_model_dtype(model: Any, kwargs: dict) -> dict:
    """The assembled inputs with every floating tensor in the model's dtype, as transformers' pipelines hand them.

    A processor featurizes images in its own dtype (Llama 4's in bfloat16,
    most in float32); the model computes in the dtype it was loaded in.
    """
    import torch

    # the model's dtype walks its parameters: asked only where some input is a floating tensor (text's ids are not)
    if not any(isinstance(value, torch.Tensor) and value.is_floating_point() for value in kwargs.values()):
        return kwargs
    dtype = getattr(model._module, "dtype", None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        return kwargs
    return {
        key: value.to(dtype)
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype
        else value
        for key, value in kwargs.items()
    }


def continues_a_cache(kwargs: dict) -> bool:
    """Whether a call continues a cache that already holds tokens (a decode step), rather than starting afresh."""
    cache = given_cache(kwargs)
    return cache is not None and getattr(cache, "get_seq_length", lambda: 0)() > 0
