"""Where transformers 5.25 itself breaks a recurrent family nnterp serves: each gap bridged on one model, and undone.

RecurrentGemma numbers a call's tokens from ``cache.get_seq_length()`` when it
is handed no ``position_ids``. transformers 5.24's ``Cache.get_seq_length``
answered layer 0's question from the first attention layer when layer 0 was a
linear-attention one; 5.25 dropped that redirection and has
``LinearAttentionLayer.get_seq_length`` count the tokens its own
``update_conv_state`` (or ``increase_count``) saw. RecurrentGemma's first
blocks are recurrent and keep their state on their modules, never in the
cache, so that count stays 0: a call continuing a cache restarts its
positions at 0, its RG-LRU resets (it resets where ``position_ids == 0``) and
its attention rotates the new tokens as the first ones. ``generate`` passes
positions of its own and is unaffected.

``continue_positions(model)`` bridges it on one loaded model, as an explicit
step (the family's load hook takes it, never an import): a forward pre-hook on
the inner ``RecurrentGemmaModel`` hands a call with a cache and no
``position_ids`` the positions the fixed forward would compute, counted from
the first attention layer's length as 5.24 did. ``release(model)`` removes it.
Nothing else of transformers is touched, and a call given positions, or no
cache, is left as it is.

Deleted by the upstream fix: ``RecurrentGemmaModel.forward`` reading the past
length off an attention layer, ``cache.get_seq_length(layer_idx)`` with the
index of the first ``layer_types`` entry that is not ``"linear_attention"``
(or its recurrent blocks advancing their cache layers' count).
"""

from __future__ import annotations

from typing import Any

from nnterp._cache import given_cache

import torch

#: the attribute of the inner model holding the hook's handle: how ``continue_positions`` stays idempotent
HANDLE = "_nnterp_positions_bridge"


def _inner(model: Any) -> torch.nn.Module:
    """The module whose forward numbers the tokens: the root's ``model`` child (the bare model where it is the root)."""
    root = getattr(model, "_module", model)
    return getattr(root, "model", root)


def past_length(cache: Any) -> int | None:
    """The tokens ``cache`` holds, read off its first layer that is not linear attention; None where every one is."""
    for index, linear in enumerate(getattr(cache, "is_linear", ())):
        if not linear:
            return int(cache.get_seq_length(index))
    return None


def _numbered(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    # RecurrentGemmaModel.forward(input_ids, position_ids, attention_mask, inputs_embeds, use_cache, cache, ...):
    # the causal LM hands every argument by keyword
    if args or kwargs.get("position_ids") is not None:
        return None
    cache = given_cache(kwargs)
    past = None if cache is None else past_length(cache)
    if not past:
        return None
    tokens = kwargs.get("input_ids")
    if tokens is None:
        tokens = kwargs.get("inputs_embeds")
    if tokens is None:
        return None
    positions = torch.arange(past, past + tokens.shape[1], device=tokens.device).unsqueeze(0)
    return args, {**kwargs, "position_ids": positions}


def continue_positions(model: Any) -> None:
    """Number a call continuing a cache from the tokens the cache holds, on ``model`` (a RecurrentGemma); idempotent."""
    inner = _inner(model)
    if getattr(inner, HANDLE, None) is None:
        setattr(inner, HANDLE, inner.register_forward_pre_hook(_numbered, with_kwargs=True))


def release(model: Any) -> None:
    """Remove ``continue_positions``'s hook from ``model``, where it holds one."""
    inner = _inner(model)
    handle = getattr(inner, HANDLE, None)
    if handle is not None:
        handle.remove()
        delattr(inner, HANDLE)
