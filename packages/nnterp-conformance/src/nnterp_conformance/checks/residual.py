"""The residual stream: what each block adds, what flows between blocks, and what reaches the logits."""

from __future__ import annotations

from typing import Any

from nnterp.identities import CONTRIBUTION, LOGITS_FROM_LAST_LAYER, MID_STREAM, STREAM_CONTINUITY, stream_sum
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import (
    Case,
    CheckFailure,
    Gaps,
    Skip,
    available,
    check,
    expect_holds,
    mixers_of,
    model_dtype,
    read,
    require,
    single_stream,
    sublayers,
)

#: the stream values around a block's contributions
BOUNDARIES = ("layer_input", "layer_output")


def contribution_blocks(model: StandardModel) -> dict[int, tuple[str, ...]]:
    """The blocks whose contribution identity can be checked, each with the contributions it adds.

    A block qualifies when its boundaries and every sublayer it has serve
    their values; ``Skip`` says why when none does.
    """
    found = {}
    for layer in range(model.num_layers):
        names = (*BOUNDARIES, *sublayers(model, layer))
        if all(layer in available(model, name) for name in names):
            found[layer] = sublayers(model, layer)
    if not found:
        support = model.support()
        reasons = {
            name: support.get(name)
            for name in (
                "layer_input",
                "self_attn.attention_output",
                "linear_attn.attention_output",
                "mlp.mlp_output",
                "layer_output",
            )
            if support.get(name)
        }
        raise Skip(f"no block serves its boundaries and every contribution it adds ({reasons})")
    return found


def read_contributions(
    model: StandardModel, case: Case, blocks: dict[int, tuple[str, ...]]
) -> dict[int, dict[str, Any]]:
    """Each block's boundaries and contributions, one trace per value name, so no forward order is assumed between them."""
    names = list(dict.fromkeys(name for terms in blocks.values() for name in (*BOUNDARIES, *terms)))
    found: dict[int, dict[str, Any]] = {layer: {} for layer in blocks}
    for name in names:
        layers = [layer for layer, terms in blocks.items() if name in (*BOUNDARIES, *terms)]
        for layer, value in zip(layers, read(model, case, [(layer, name) for layer in layers])):
            found[layer][name] = value
    return found


@check("residual", applies=single_stream)
def contribution(model: StandardModel, case: Case) -> str:
    """layer_input + attention_output + mlp_output == layer_output on every block (the sublayers each block has)."""
    blocks = contribution_blocks(model)
    values = read_contributions(model, case, blocks)
    gaps = Gaps()
    for layer, terms in blocks.items():
        found = values[layer]
        parts = [found[name] for name in terms]
        gaps.add(
            expect_holds(
                CONTRIBUTION,
                f"layers[{layer}]: layer_input + {' + '.join(name.split('.')[-1] for name in terms)} against layer_output",
                found["layer_output"].float(),
                stream_sum(found["layer_input"], parts),
                dtype=coarsest(found["layer_input"], *parts, found["layer_output"]),
            )
        )
    return str(gaps)


@check("residual")
def stream_continuity(model: StandardModel, case: Case) -> str:
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
        expect_holds(
            STREAM_CONTINUITY, f"layers[{layer + 1}].layer_input against layers[{layer}].layer_output", received, sent
        )
    return f"{len(pairs)} boundaries equal"


def mid_terms(model: StandardModel, layer: int) -> tuple[str, ...]:
    """The terms block ``layer``'s ``layer_mid`` is the sum of besides ``layer_input``: its mixers' ``attention_output``,
    after the rescaling of ``layer_input`` where the block has one (``Layer.mid_terms``)."""
    terms = getattr(model.layers[layer], "mid_terms", None)
    return terms() if terms is not None else tuple(f"{mixer}.attention_output" for mixer in mixers_of(model, layer))


@check("residual", applies=single_stream)
def mid_stream(model: StandardModel, case: Case) -> str:
    """layer_mid == layer_input + the mixers' attention_output (+ layer_input_rescaling) where the block has a mid stream."""
    blocks: dict[int, tuple[str, ...]] = {}
    for layer in require(model, "layer_input", "layer_mid"):
        terms = mid_terms(model, layer)
        if any(name.endswith("attention_output") for name in terms) and all(
            layer in available(model, name) for name in terms
        ):
            blocks[layer] = terms
    if not blocks:
        support = model.support()
        names = ("layer_mid", "layer_input_rescaling", "self_attn.attention_output", "linear_attn.attention_output")
        reasons = {name: support.get(name) for name in names if support.get(name)}
        raise Skip(f"no block serves layer_mid beside the terms it sums ({reasons})")
    values = read_contributions(model, case, blocks)
    mids = dict(zip(blocks, read(model, case, [(layer, "layer_mid") for layer in blocks])))
    gaps = Gaps()
    for layer, terms in blocks.items():
        found, mid = values[layer], mids[layer]
        parts = [found[name] for name in terms]
        gaps.add(
            expect_holds(
                MID_STREAM,
                f"layers[{layer}]: layer_input + {' + '.join(terms)} against layer_mid",
                mid.float(),
                stream_sum(found["layer_input"], parts),
                dtype=coarsest(found["layer_input"], *parts, mid),
            )
        )
    return str(gaps)


@check("residual")
def logits_from_last_layer(model: StandardModel, case: Case) -> str:
    """lm_head(norm(layers[-1].layer_output)) equals logits."""
    last = model.num_layers - 1
    if last not in require(model, "layer_output"):
        raise CheckFailure(f"layers[{last}].layer_output is unavailable")
    with torch.no_grad(), model.trace(case.batch):
        stream = model.layers[last].layer_output
        projected = model.project_on_vocab(stream).detach().clone().save()
        logits = model.logits.detach().clone().save()
    # logits a model upcasts to float32 carry the rounding of the half-precision weights that made them
    gap = expect_holds(
        LOGITS_FROM_LAST_LAYER,
        "lm_head(norm(last layer_output)) against logits",
        logits,
        projected,
        dtype=coarsest(logits, model_dtype(model)),
    )
    return f"largest gap {gap:.3g}"
