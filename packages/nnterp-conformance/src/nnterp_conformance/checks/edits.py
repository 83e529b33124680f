"""Edits reach the model: an in-place edit and an assignment of each writable value, and skipping a block."""

from __future__ import annotations

from typing import Any

import torch

from .base import Case, CheckFailure, check, expect_close, get, require

#: block values a researcher writes, in forward order
WRITABLE = (
    "layer_input",
    "self_attn.attention_probabilities",
    "self_attn.attention_output",
    "linear_attn.attention_output",
    "layer_mid",
    "mlp.mlp_neurons",
    "mlp.mlp_output",
    "layer_output",
)


def _logits(model: Any, case: Case, edit: Any = None) -> torch.Tensor:
    with torch.no_grad(), model.trace(case.batch):
        if edit is not None:
            edit(model)
        logits = model.logits.detach().clone().save()
    return logits


def _in_place(case: Case, layer: int, name: str) -> Any:
    def edit(model: Any) -> None:
        value = get(model.layers[layer], name)
        value[:] = case.edited(value)

    return edit


def _assigned(case: Case, layer: int, name: str) -> Any:
    def edit(model: Any) -> None:
        host, _, attribute = f"layers.{layer}.{name}".rpartition(".")
        target = get(model, host)
        setattr(target, attribute, case.edited(getattr(target, attribute)))

    return edit


@check("edits")
def edits_reach_the_model(model: Any, case: Case) -> str:
    """An in-place edit of each writable value, and the same edit assigned, move the logits, and alike."""
    support = model.support()
    baseline = _logits(model, case)
    done = []
    for name in (name for name in WRITABLE if name in support):
        blocks = [layer for layer in range(model.num_layers) if not support[name] or layer not in support[name]]
        if not blocks:
            continue
        layer = case.pick(blocks)
        in_place = _logits(model, case, _in_place(case, layer, name))
        assigned = _logits(model, case, _assigned(case, layer, name))
        if torch.equal(in_place, baseline):
            raise CheckFailure(f"layers[{layer}].{name}: an in-place {case.edit} edit left the logits unchanged")
        if torch.equal(assigned, baseline):
            raise CheckFailure(f"layers[{layer}].{name}: an assigned {case.edit} edit left the logits unchanged")
        expect_close(f"layers[{layer}].{name}: logits after the assignment against after the in-place {case.edit} edit", assigned, in_place)
        done.append(f"{name}@{layer}")
    if not done:
        raise CheckFailure("no writable value is available on any block")
    return f"{case.edit} edits reached the model: " + ", ".join(done)


@check("edits")
def skip_hands_on_hidden(model: Any, case: Case) -> str:
    """layers[i].skip(hidden) hands hidden on as the block's layer_output."""
    blocks = [layer for layer in require(model, "layer_input") if layer + 1 < model.num_layers]
    if not blocks:
        raise CheckFailure("no block with a next block to receive the replacement")
    layer = case.pick(blocks)
    returned: list[bool] = []
    with torch.no_grad(), model.trace(case.batch):
        returned.append(isinstance(model.layers[layer].output, (tuple, list)))
    packed = model.layers[layer].returns_a_tuple()
    if returned[0] != packed:
        forms = {True: "a tuple", False: "a bare tensor"}
        raise CheckFailure(
            f"layers[{layer}] returns {forms[returned[0]]}, but skip packs its replacement as {forms[packed]} "
            f"(returns_a_tuple: the forward's return statements, else the family's returns_tuple)"
        )
    with torch.no_grad(), model.trace(case.batch):
        hidden = case.edited(model.layers[layer].layer_input)
        model.layers[layer].skip(hidden)
        received = model.layers[layer + 1].layer_input.detach().clone().save()
        sent = hidden.detach().clone().save()
    expect_close(f"layers[{layer}].skip(hidden): layers[{layer + 1}].layer_input against hidden", received, sent)
    return f"layers[{layer}] skipped; layers[{layer + 1}] received the replacement"
