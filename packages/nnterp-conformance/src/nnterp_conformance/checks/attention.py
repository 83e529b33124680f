"""The attention: its pattern is the softmax of its scores, it is causal, and its heads make its contribution."""

from __future__ import annotations

from nnterp.identities import PATTERN_IS_SOFTMAX_OF_SCORES, softmax_pattern
from nnterp.protocols import StandardModel

import torch

from .base import (
    Case,
    CheckFailure,
    Gaps,
    Skip,
    check,
    expect_close,
    expect_holds,
    has_softmax_attention,
    read,
    require,
)


@check("attention", applies=has_softmax_attention)
def pattern_is_softmax_of_scores(model: StandardModel, case: Case) -> str:
    """softmax(attention_scores) == attention_probabilities, and each row sums to one."""
    names = ("self_attn.attention_scores", "self_attn.attention_probabilities")
    blocks = require(model, *names)
    values = iter(read(model, case, [(layer, name) for layer in blocks for name in names]))
    gaps = Gaps()
    for layer in blocks:
        scores, pattern = next(values), next(values)
        attention = model.layers[layer].self_attn
        # the sink joins the softmax as one more column per head, then is dropped from the pattern
        sink = getattr(attention, "sink_column", False)
        expected = softmax_pattern(scores, attention.sink_logits if sink else None).to(pattern.dtype)
        what = f"layers[{layer}]: softmax(attention_scores) against attention_probabilities"
        gaps.add(expect_holds(PATTERN_IS_SOFTMAX_OF_SCORES, what, pattern, expected))
        sums = pattern.float().sum(-1)
        if sink:
            if (sums > 1 + 1e-3).any():
                raise CheckFailure(
                    f"layers[{layer}]: a row of the pattern sums past one ({sums.max().item():.4f}) on a sink model"
                )
        else:
            gaps.add(
                expect_close(
                    f"layers[{layer}]: rows of attention_probabilities against one",
                    sums,
                    torch.ones_like(sums),
                    dtype=pattern.dtype,
                )
            )
    return str(gaps)


@check("attention", applies=has_softmax_attention)
def written_pattern_moves_logits(model: StandardModel, case: Case) -> str:
    """Writing the pattern moves the logits; writing it back unchanged does not (a read can be causally inert)."""
    layer = case.pick(require(model, "self_attn.attention_probabilities"))
    heads = model.layers[layer].self_attn.num_heads
    head = min(int(case.head * heads), heads - 1)
    with torch.no_grad():
        with model.trace(case.batch):
            baseline = model.logits.detach().clone().save()
        with model.trace(case.batch):
            attention = model.layers[layer].self_attn
            attention.attention_probabilities = attention.attention_probabilities.clone()
            unchanged = model.logits.detach().clone().save()
        with model.trace(case.batch):
            pattern = model.layers[layer].self_attn.attention_probabilities
            # one head attends nowhere: whatever the prompt (one token has one possible pattern), its output goes
            replacement = pattern.clone()
            replacement[:, head] = 0
            model.layers[layer].self_attn.attention_probabilities = replacement
            moved = model.logits.detach().clone().save()
    expect_close(f"layers[{layer}]: logits after writing the pattern back unchanged", unchanged, baseline)
    shift = (moved - baseline).abs().max().item()
    if shift == 0:
        raise CheckFailure(
            f"layers[{layer}]: writing attention_probabilities left the logits unchanged: the value is not the pattern the model uses"
        )
    return f"layers[{layer}], head {head}: a written pattern moved the logits by up to {shift:.3g}"


@check("attention", applies=has_softmax_attention)
def head_outputs_make_the_projection(model: StandardModel, case: Case) -> str:
    """The head outputs, joined and through the output projection, are what the projection returns in the run."""
    blocks = [
        layer
        for layer in require(model, "self_attn.attention_head_outputs")
        if hasattr(model.layers[layer].self_attn, "o_proj")
    ]
    if not blocks:
        raise Skip(
            "no block with head outputs projects them through an o_proj module (the projection is the module's own arithmetic)"
        )
    gaps = Gaps()
    found: list = []
    with torch.no_grad(), model.trace(case.batch):
        for layer in blocks:
            attention = model.layers[layer].self_attn
            heads = attention.attention_head_outputs
            projected = attention.o_proj(heads.reshape(*heads.shape[:2], -1)).detach().clone()
            found.append((layer, projected, attention.o_proj.output.detach().clone()))
    for layer, projected, output in found:
        gaps.add(
            expect_close(f"layers[{layer}]: o_proj(attention_head_outputs) against o_proj's output", projected, output)
        )
    return str(gaps)
