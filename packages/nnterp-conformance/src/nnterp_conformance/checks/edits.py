"""Edits reach the model: an in-place edit and an assignment of each writable value, and skipping a block."""

from __future__ import annotations

from typing import Any

import torch

from .base import CheckFailure, check, expect_close, get, require

#: block values a researcher writes, in forward order
WRITABLE = (
    "layer_input",
    "self_attn.attention_probabilities",
    "self_attn.attention_output",
    "layer_mid",
    "mlp.mlp_neurons",
    "mlp.mlp_output",
    "layer_output",
)
SCALE = 0.5


def _logits(model: Any, prompts: Any, edit: Any = None) -> torch.Tensor:
    with torch.no_grad(), model.trace(prompts):
        if edit is not None:
            edit(model)
        logits = model.logits.detach().clone().save()
    return logits


def _in_place(layer: int, name: str) -> Any:
    def edit(model: Any) -> None:
        value = get(model.layers[layer], name)
        value[:] = value * SCALE

    return edit


def _assigned(layer: int, name: str) -> Any:
    def edit(model: Any) -> None:
        host, _, attribute = f"layers.{layer}.{name}".rpartition(".")
        target = get(model, host)
        setattr(target, attribute, getattr(target, attribute) * SCALE)

    return edit


@check("edits")
def edits_reach_the_model(model: Any, prompts: Any) -> str:
    """Scaling each writable value in place, or assigning it scaled, moves the logits, and both move them alike."""
    support = model.support()
    names = [name for name in WRITABLE if name in support]
    baseline = _logits(model, prompts)
    done = []
    for name in names:
        blocks = [layer for layer in range(model.num_layers) if not support[name] or layer not in support[name]]
        if not blocks:
            continue
        layer = blocks[len(blocks) // 2]
        in_place = _logits(model, prompts, _in_place(layer, name))
        assigned = _logits(model, prompts, _assigned(layer, name))
        if torch.equal(in_place, baseline):
            raise CheckFailure(f"layers[{layer}].{name}: an in-place edit left the logits unchanged")
        if torch.equal(assigned, baseline):
            raise CheckFailure(f"layers[{layer}].{name}: an assignment left the logits unchanged")
        expect_close(f"layers[{layer}].{name}: logits after an assignment against after the same in-place edit", assigned, in_place)
        done.append(f"{name}@{layer}")
    if not done:
        raise CheckFailure("no writable value is available on any block")
    return "reached the model: " + ", ".join(done)


@check("edits")
def skip_hands_on_hidden(model: Any, prompts: Any) -> str:
    """layers[i].skip(hidden) hands hidden on as the block's layer_output."""
    blocks = require(model, "layer_input")
    layer = blocks[0]
    with torch.no_grad(), model.trace(prompts):
        hidden = model.layers[layer].layer_input * 2
        model.layers[layer].skip(hidden)
        if layer + 1 < model.num_layers:
            received = model.layers[layer + 1].layer_input.detach().clone().save()
        else:
            received = model.logits.detach().clone().save()
        sent = hidden.detach().clone().save()
    if layer + 1 < model.num_layers:
        expect_close(f"layers[{layer}].skip(hidden): layers[{layer + 1}].layer_input against hidden", received, sent)
    return f"layers[{layer}] skipped; the next block received the replacement"
