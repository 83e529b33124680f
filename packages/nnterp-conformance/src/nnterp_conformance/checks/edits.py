"""Edits reach the model: an in-place edit and an assignment of each writable value, and skipping a block."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nnterp.protocols import StandardModel

import torch

from .base import Case, CheckFailure, Skip, check, expect_close, get, require

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


def _logits(model: StandardModel, case: Case, edit: Any = None) -> torch.Tensor:
    with torch.no_grad(), model.trace(case.batch):
        if edit is not None:
            edit(model)
        logits = model.logits.detach().clone().save()
    return logits


def _in_place(case: Case, layer: int, name: str) -> Any:
    def edit(model: StandardModel) -> None:
        value = get(model.layers[layer], name)
        value[:] = case.edited(value)

    return edit


def _assigned(case: Case, layer: int, name: str) -> Any:
    def edit(model: StandardModel) -> None:
        host, _, attribute = f"layers.{layer}.{name}".rpartition(".")
        target = get(model, host)
        setattr(target, attribute, case.edited(getattr(target, attribute)))

    return edit


@check("edits")
def edits_reach_the_model(model: StandardModel, case: Case) -> str:
    """An in-place edit of each writable value, and the same edit assigned, move the logits, and alike."""
    support = model.support()
    baseline = _logits(model, case)
    # a scaled value is what a norm downstream undoes (the final norm after the last block's stream, a post norm after
    # the attention's pattern), up to its epsilon, which half precision rounds away: such a case edits with noise
    case = replace(case, edit="noise") if case.edit == "scale" else case
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
        expect_close(
            f"layers[{layer}].{name}: logits after the assignment against after the in-place {case.edit} edit",
            assigned,
            in_place,
        )
        done.append(f"{name}@{layer}")
    if not done:
        raise CheckFailure("no writable value is available on any block")
    return f"{case.edit} edits reached the model: " + ", ".join(done)


@check("edits")
def skip_hands_on_hidden(model: StandardModel, case: Case) -> str:
    """layers[i].skip(hidden) hands hidden on as the block's layer_output."""
    blocks = [layer for layer in require(model, "layer_input") if layer + 1 < model.num_layers]
    # a block whose skipping breaks a later one (it stores keys and values later blocks reuse) says why
    breaks = {
        layer: why
        for layer in blocks
        if (why := (getattr(model.layers[layer], "skip_breaks", None) or (lambda: None))())
    }
    if breaks and len(breaks) == len(blocks):
        raise Skip(f"skipping any block breaks a later one: {'; '.join(sorted(set(breaks.values())))}")
    blocks = [layer for layer in blocks if layer not in breaks]
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
        sent = hidden.detach().clone().save()  # type: ignore[attr-defined]  # nnsight gives tensors .save() in a trace; torch's stubs lack it
    expect_close(f"layers[{layer}].skip(hidden): layers[{layer + 1}].layer_input against hidden", received, sent)
    return f"layers[{layer}] skipped; layers[{layer + 1}] received the replacement"


def assignable(root: Any) -> list[tuple[int | None, str]]:
    """Each value a user can assign below ``root`` (the model, or its vision tower), with the block it is tried on:
    every served root value, and every served block value on the first block that has it. Read-only values (derived,
    or read off the inputs) are left out."""
    from nnterp.descriptors import declared_values

    own = declared_values(type(root))
    found: list[tuple[int | None, str]] = [
        (None, name) for name, value in own.items() if value.read_only is None and value.reason(root) is None
    ]
    for name, reasons in root.support().items():
        if name in own:
            continue
        blocks = [layer for layer in range(root.num_layers) if not reasons or layer not in reasons]
        writable = [layer for layer in blocks if _descriptor(root.layers[layer], name).read_only is None]
        found.extend((layer, name) for layer in writable[:1])
    return found


def _descriptor(block: Any, dotted: str) -> Any:
    host, _, name = f".{dotted}".rpartition(".")
    return type(get(block, host[1:]) if host else block).values()[name]


def _assigned_back(
    model: StandardModel, prefix: str, layer: int | None, name: str, prompts: Any, inputs: dict
) -> tuple[Any, bool]:
    """The logits of a trace in which ``name`` (on block ``layer`` below ``prefix``) is assigned what it reads, and
    whether it read a value at all (a fresh prompt's state_input reads None)."""
    path = f"{prefix}{name}" if layer is None else f"{prefix}layers.{layer}.{name}"
    host, _, attribute = path.rpartition(".")
    read: list[bool] = []  # filled inside the trace, whose locals do not come back out
    with torch.no_grad(), model.trace(prompts, **inputs):
        target = get(model, host) if host else model
        value = getattr(target, attribute)
        read.append(value is not None)
        if value is not None:
            setattr(target, attribute, value.clone())
        logits = model.logits.detach().clone().save()
    return logits, read[0]


def assign_each_back(model: StandardModel, root: Any, prefix: str, prompts: Any, inputs: dict) -> str:
    """Assign every assignable value below ``root`` what it reads, one trace each, and fail where the logits move."""
    with torch.no_grad(), model.trace(prompts, **inputs):
        baseline = model.logits.detach().clone().save()
    done: list[str] = []
    none: list[str] = []
    for layer, name in assignable(root):
        where = f"{prefix}{name}" if layer is None else f"{prefix}layers[{layer}].{name}"
        try:
            logits, read = _assigned_back(model, prefix, layer, name, prompts, inputs)
        except Exception as error:  # noqa: BLE001 - a write-back that breaks the forward is this check's failure
            raise CheckFailure(
                f"{where}, assigned what it reads: the forward broke ({type(error).__name__}: {error})"
            ) from None
        expect_close(f"{where}, assigned what it reads: the logits against the unassigned run's", logits, baseline)
        (done if read else none).append(where)
    if not done:
        raise CheckFailure("no value could be assigned")
    return f"{len(done)} values assigned back unchanged" + (
        f"; {len(none)} read None ({', '.join(none)})" if none else ""
    )


@check("edits", drawn=False)
def assigning_what_was_read_changes_nothing(model: StandardModel, case: Case) -> str:
    """Every assignable value, assigned what it reads, leaves the logits as they were: each write-back lays the value out as the model holds it."""
    return assign_each_back(model, model, "", case.batch, {})
