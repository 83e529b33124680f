"""A cache handed to a call that fails comes back as it was before the call.

A trace continuing a cache (``model.trace(prompt, cache=cache)``)
whose intervention fails half way (a value read out of order, a write that does
not fit) has already appended the first blocks' keys to it; the next call would
continue from a prompt the model never finished. The call's cache is
remembered as it starts and put back when the call raises.
"""

from __future__ import annotations

from typing import Any

import torch

#: the keywords a call may hand its cache by: transformers' own (``cache``) first, then the spellings it deprecates
#: (``past_key_values``, ``cache_params``), which a user may still pass and transformers still renames
CACHE_KEYWORDS = ("cache", "past_key_values", "cache_params")

#: the per-layer tensors transformers' dynamic layers replace by concatenation (never in place): kept by reference
REPLACED = ("keys", "values")


def given_cache(kwargs: dict) -> Any:
    """The cache a call's keyword arguments hand the model, under whichever spelling they use, or None."""
    for keyword in CACHE_KEYWORDS:
        if kwargs.get(keyword) is not None:
            return kwargs[keyword]
    return None


def snapshot(cache: Any) -> list[tuple[Any, dict]] | None:
    """Each layer of ``cache`` with its attributes as they are now, or None for no (or no layered) cache."""
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        return None
    return [
        (
            layer,
            {
                key: value.clone() if isinstance(value, torch.Tensor) and key not in REPLACED else value
                for key, value in vars(layer).items()
            },
        )
        for layer in layers
    ]


def restore(saved: list[tuple[Any, dict]] | None) -> None:
    """Put every layer saved by ``snapshot`` back as it was."""
    for layer, state in saved or ():
        vars(layer).clear()
        vars(layer).update(state)
