"""The residual stream: what each block adds, what flows between blocks, and what reaches the logits."""

from __future__ import annotations

from typing import Any

import torch

from .base import Case, CheckFailure, Gaps, check, expect_close, read, read_apart, require

CONTRIBUTION = ("layer_input", "self_attn.attention_output", "mlp.mlp_output", "layer_output")


@check("residual")
def contribution(model: Any, case: Case) -> str:
    """layer_input + attention_output + mlp_output == layer_output on every block."""
    blocks = require(model, *CONTRIBUTION)
    values = read_apart(model, case, CONTRIBUTION, blocks)
    gaps = Gaps()
    for index, layer in enumerate(blocks):
        stream, attention, mlp, output = (values[name][index] for name in CONTRIBUTION)
        gaps.add(
            expect_close(
                f"layers[{layer}]: layer_input + attention_output + mlp_output against layer_output",
                stream + attention + mlp,
                output,
            )
        )
    return str(gaps)


@check("residual")
def stream_continuity(model: Any, case: Case) -> str:
    """layers[i].layer_output is what layers[i+1].layer_input receives."""
    outputs = require(model, "layer_output")
    inputs = set(require(model, "layer_input"))
    pairs = [layer for layer in outputs if layer + 1 in inputs]
    plan = sorted(
        {(layer + offset, name) for layer in pairs for offset, name in ((0, "layer_output"), (1, "layer_input"))},
        key=lambda item: (item[0], item[1] == "layer_output"),
    )
    found = dict(zip(plan, read(model, case, plan)))
    for layer in pairs:
        sent, received = found[(layer, "layer_output")], found[(layer + 1, "layer_input")]
        if not torch.equal(sent, received):
            gap = (sent - received).abs().max().item()
            raise CheckFailure(f"layers[{layer}].layer_output differs from layers[{layer + 1}].layer_input by {gap:.3g}")
    return f"{len(pairs)} boundaries equal"


@check("residual")
def mid_stream(model: Any, case: Case) -> str:
    """layer_mid == layer_input + attention_output where the block has a mid stream."""
    names = ("layer_input", "self_attn.attention_output", "layer_mid")
    blocks = require(model, *names)
    values = read_apart(model, case, names, blocks)
    gaps = Gaps()
    for index, layer in enumerate(blocks):
        stream, attention, mid = (values[name][index] for name in names)
        gaps.add(expect_close(f"layers[{layer}]: layer_input + attention_output against layer_mid", stream + attention, mid))
    return str(gaps)


@check("residual")
def logits_from_last_layer(model: Any, case: Case) -> str:
    """lm_head(norm(layers[-1].layer_output)) equals logits."""
    last = model.num_layers - 1
    if last not in require(model, "layer_output"):
        raise CheckFailure(f"layers[{last}].layer_output is unavailable")
    with torch.no_grad(), model.trace(case.batch):
        stream = model.layers[last].layer_output
        projected = model.project_on_vocab(stream).detach().clone().save()
        logits = model.logits.detach().clone().save()
    gap = expect_close("lm_head(norm(last layer_output)) against logits", projected, logits)
    return f"largest gap {gap:.3g}"
