"""RecurrentGemma under transformers 5.25: a call continuing a cache is numbered on from it (``transformers_bridge``)."""

import torch
from nnterp_recurrent.transformers_bridge import HANDLE, continue_positions, release
from transformers import DynamicCache

IDS = torch.tensor([[5, 17, 42, 8, 99, 23, 61]])


def _continuation_gap(model) -> float:
    """Last-token logits of one call against the prompt and a one-token call over its cache, on the bare module."""
    model.dispatch()  # the real weights, and the family's load hook again on the modules that hold them
    module = model._module
    with torch.no_grad():
        whole = module(IDS).logits[:, -1]
        cache = DynamicCache(config=module.config)
        module(IDS[:, :-1], cache=cache, use_cache=True)
        step = module(IDS[:, -1:], cache=cache, use_cache=True).logits[:, -1]
    return (whole - step).abs().max().item()


def test_a_call_over_a_cache_continues_the_prompt(tiny_model):
    model = tiny_model("recurrent_gemma")
    assert _continuation_gap(model) < 1e-5


def test_the_bridge_is_still_needed_and_undoes(tiny_model):
    model = tiny_model("recurrent_gemma")
    model.dispatch()
    inner = model._module.model
    release(model)
    try:
        assert getattr(inner, HANDLE, None) is None and not inner._forward_pre_hooks
        # the upstream bug: the cache's length is read off its first layer, a recurrent one that counts nothing
        assert _continuation_gap(model) > 1e-3, (
            "transformers numbers a continued RecurrentGemma call from its cache again: delete "
            "nnterp_recurrent.transformers_bridge, the family's built hook and its docs/compatibility.md section"
        )
    finally:
        continue_positions(model)
        continue_positions(model)
    assert len(inner._forward_pre_hooks) == 1
