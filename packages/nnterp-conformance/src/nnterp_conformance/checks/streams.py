"""Several residual streams per token (hyper-connections): how each sublayer reads the streams and writes back into them.

On a multi-stream block (``nnterp.components.streams.StreamLayer``) the sum
identities of ``residual.py`` do not apply; these do, sublayer by sublayer,
with ``before``/``after`` the streams around it (``layer_input`` and
``layer_mid`` around the attention, ``layer_mid`` and ``layer_output`` around
the MLP):

- the sublayer reads the collapse: ``collapsed == sum_j collapse[j] * before[j]``;
- the streams after it follow: ``after[k] == spread[k] * output + sum_j mixing[j, k] * before[j]``
  (the identity for mixing where the block carries the streams unmixed);
- a written weight reaches the model: the identities hold with the written
  weights in the same run, and the logits move.

A block says its steps in these terms (``StreamLayer.STREAM_STEPS``): a
hyper-connection block one per sublayer, AltUp (Gemma 3n) one per block, whose
``after`` also holds a term added to some streams (``added``: the per-layer
input's, on the streams ``streams_added_to`` names) and whose output, on the
stream the sublayers run on, is a sum of named terms (``stream_updates_add_up``).
"""

from __future__ import annotations

from typing import Any, cast

from nnterp.components.streams import StreamLayer
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import Case, CheckFailure, Gaps, Skip, available, check, expect_close, get, multi_stream, read

#: per sublayer: the streams around it, its output, and the names of its weights (``StreamLayer``'s), where a block
#: does not say its own steps
SUBLAYERS: dict[str, dict[str, Any]] = StreamLayer.STREAM_STEPS

#: the entries of a step that name one value each, in the order the step lists them (its forward order)
VALUES = ("before", "mixing", "collapse", "spread", "collapsed", "mid", "output", "added", "after")


def steps_of(model: StandardModel, layer: int) -> dict[str, dict[str, Any]]:
    """Block ``layer``'s steps in stream terms (its ``STREAM_STEPS``), each step's names in its forward order."""
    return getattr(type(model.layers[layer]), "STREAM_STEPS", SUBLAYERS)


def in_order(values: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` the step has, in the order the step lists them (the forward's): a trace reads them so."""
    return [name for name in values if name in names and name in VALUES]


def _unmixed(model: StandardModel, layer: int) -> bool:
    """Whether block ``layer`` carries its streams past the sublayers unmixed (its ``UNMIXED`` reason is set)."""
    return getattr(type(model.layers[layer]), "UNMIXED", None) is not None


def _sublayers(model: StandardModel, names: tuple[str, ...]) -> dict[tuple[int, str], dict[str, str]]:
    """``(layer, sublayer)`` -> its names, where the block serves every value of ``names`` (the mixing may be the identity)."""
    found = {}
    for layer in range(model.num_layers):
        for sublayer, values in steps_of(model, layer).items():
            if sublayer in SUBLAYERS and not hasattr(model.layers[layer], sublayer):
                continue
            needed = [
                values[name] for name in names if name in values and not (name == "mixing" and _unmixed(model, layer))
            ]
            if all(layer in available(model, name) for name in needed):
                found[(layer, sublayer)] = values
    if not found:
        support = model.support()
        wanted = {
            values[name]
            for layer in range(model.num_layers)
            for values in steps_of(model, layer).values()
            for name in names
            if name in values
        }
        reasons = {name: support.get(name) for name in sorted(wanted) if support.get(name)}
        raise Skip(f"no multi-stream block serves {', '.join(names)} ({reasons})")
    return found


def collapse(weights: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """``sum_j weights[..., j] * streams[..., j, :]``: the one stream the weights collapse the streams into, in float32."""
    return (weights.float().unsqueeze(-1) * streams.float()).sum(dim=-2)


def spread_and_mix(
    spread: torch.Tensor,
    output: torch.Tensor,
    mixing: torch.Tensor | None,
    streams: torch.Tensor,
    added: torch.Tensor | None = None,
    added_to: tuple[int, ...] = (),
) -> torch.Tensor:
    """``spread[k] * output + sum_j mixing[j, k] * streams[j]`` in float32: the streams after a sublayer (``mixing``
    None: carried unmixed), plus ``added`` on each stream of ``added_to``."""
    carried = streams.float() if mixing is None else torch.einsum("bsjk,bsjh->bskh", mixing.float(), streams.float())
    after = spread.float().unsqueeze(-1) * output.float().unsqueeze(-2) + carried
    if added is not None and added_to:
        where = torch.zeros(after.shape[-2], dtype=after.dtype, device=after.device)
        where[list(added_to)] = 1
        after = after + where.unsqueeze(-1) * added.float().unsqueeze(-2)
    return after


def _added_to(model: StandardModel, layer: int, values: dict[str, Any]) -> tuple[int, ...]:
    """The streams the step's ``added`` term reaches on block ``layer`` (none where it has no such term)."""
    return model.layers[layer].streams_added_to(values["added"]) if "added" in values else ()


def _after(
    found: dict[str, torch.Tensor], model: StandardModel, layer: int, values: dict[str, Any], unmixed: bool
) -> torch.Tensor:
    """The streams after the step, from the values read before them (``found``, keyed by the step's entries)."""
    return spread_and_mix(
        found["spread"],
        found["output"],
        None if unmixed else found["mixing"],
        found["before"],
        found.get("added"),
        _added_to(model, layer, values),
    )


def _terms_said(values: dict[str, Any], unmixed: bool) -> str:
    added = f" + {values['added']} on its streams" if "added" in values else ""
    return f"{values['spread']} * {values['output']} + {'' if unmixed else values['mixing'] + '^T @ '}{values['before']}{added}"


@check("streams", applies=multi_stream)
def streams_follow_from_mixing(model: StandardModel, case: Case) -> str:
    """The streams after each sublayer are its output spread by its spread weights plus the streams before it mixed:
    after[k] == spread[k] * output + sum_j mixing[j, k] * before[j]."""
    sublayers = _sublayers(model, ("before", "after", "output", "spread", "mixing", "added"))
    gaps = Gaps()
    for (layer, _sublayer), values in sublayers.items():
        unmixed = _unmixed(model, layer)
        names = [
            name
            for name in in_order(values, ("before", "mixing", "spread", "output", "added", "after"))
            if not (name == "mixing" and unmixed)
        ]
        # one trace per value: no forward order is assumed between them, so a value read at the wrong place still
        # reads, and the identity is what fails
        found = {name: read(model, case, [(layer, values[name])])[0] for name in names}
        expected = _after(found, model, layer, values, unmixed)
        gaps.add(
            expect_close(
                f"layers[{layer}]: {_terms_said(values, unmixed)} against {values['after']}",
                expected,
                found["after"].float(),
                dtype=coarsest(*found.values()),
            )
        )
    return str(gaps)


@check("streams", applies=multi_stream)
def sublayers_read_the_collapse(model: StandardModel, case: Case) -> str:
    """What each sublayer reads is the streams before it collapsed by its collapse weights:
    collapsed == sum_j collapse[j] * before[j], and its pre-norm is called with it."""
    sublayers = _sublayers(model, ("before", "collapse", "collapsed"))
    gaps = Gaps()
    for (layer, _sublayer), values in sublayers.items():
        before, weights, collapsed = (
            read(model, case, [(layer, values[name])])[0] for name in ("before", "collapse", "collapsed")
        )
        gaps.add(
            expect_close(
                f"layers[{layer}]: sum_j {values['collapse']}[j] * {values['before']}[j] against {values['collapsed']}",
                collapse(weights, before),
                collapsed.float(),
                dtype=coarsest(before, weights, collapsed),
            )
        )
        norm = values.get("norm")
        if norm is not None and norm in model.layers[layer].__dict__:
            (entering,) = read(model, case, [(layer, f"{norm}.input")])
            gaps.add(
                expect_close(
                    f"layers[{layer}]: {values['collapsed']} against what {norm} is called with", collapsed, entering
                )
            )
    return str(gaps)


def _written(
    model: StandardModel, case: Case, layer: int, values: dict[str, str], written: str, unmixed: bool
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One run with ``written`` (a weight's name) assigned its edit: every value around the sublayer read after it, and the logits."""
    block = model.layers[layer]
    order = in_order(values, ("before", "collapse", "mixing", "spread", "collapsed", "output", "added", "after"))
    found: dict[str, Any] = {}
    with torch.no_grad(), model.trace(case.batch):
        for name in order:
            if name == "mixing" and unmixed:
                continue
            dotted = values[name]
            value = get(block, dotted)
            if dotted == written:
                setattr(block, dotted, case.edited(value))
                value = get(block, dotted)
            found[name] = value.detach().clone().save()
        logits = model.logits.detach().clone().save()
    return dict(found), logits


@check("streams", applies=multi_stream, drawn=False)
def written_stream_weights_reach_the_model(model: StandardModel, case: Case) -> str:
    """A written collapse, spread or mixing weight is what the model computes with (the identities hold with it in the
    same run), and it moves the logits: a read that is causally inert fails."""
    sublayers = _sublayers(model, ("before", "after", "output", "collapse", "collapsed", "spread", "mixing", "added"))
    layer = case.pick(sorted({layer for layer, _ in sublayers}))
    with torch.no_grad(), model.trace(case.batch):
        clean = model.logits.detach().clone().save()
    gaps = Gaps()
    for (at, _sublayer), values in sublayers.items():
        if at != layer:
            continue
        unmixed = _unmixed(model, layer)
        for weight in ("collapse", "spread", "mixing"):
            if weight == "mixing" and unmixed:
                continue
            if type(model.layers[layer]).values()[values[weight]].read_only is not None:
                continue  # derived from another weight (AltUp's collapse is its mixing's active column): written through that one
            found, logits = _written(model, case, layer, values, values[weight], unmixed)
            where = f"layers[{layer}] with {values[weight]} written"
            dtype = coarsest(*found.values())
            gaps.add(
                expect_close(
                    f"{where}: sum_j {values['collapse']}[j] * {values['before']}[j] against {values['collapsed']}",
                    collapse(found["collapse"], found["before"]),
                    found["collapsed"].float(),
                    dtype=dtype,
                )
            )
            expected = _after(found, model, layer, values, unmixed)
            gaps.add(
                expect_close(
                    f"{where}: spread * output + mixed streams against {values['after']}",
                    expected,
                    found["after"].float(),
                    dtype=dtype,
                )
            )
            if torch.equal(logits, clean):
                raise CheckFailure(
                    f"{where}: the logits did not move (the written weight is not what the model computes with)"
                )
    return str(gaps)


def _summed_steps(model: StandardModel) -> dict[tuple[int, str], dict[str, Any]]:
    """``(layer, step)`` -> its names, for each step whose output is a sum of named terms (``terms``)."""
    return {
        (layer, step): values
        for layer in range(model.num_layers)
        for step, values in steps_of(model, layer).items()
        if "terms" in values
    }


def updates_are_sums(model: StandardModel) -> bool:
    """Whether a multi-stream block says what its sublayers add to the stream they run on is a sum of named terms
    (AltUp's innovation)."""
    return multi_stream(model) and bool(_summed_steps(model))


@check("streams", applies=updates_are_sums)
def stream_updates_add_up(model: StandardModel, case: Case) -> str:
    """What a step's sublayers add to the one stream they run on is the sum of its named terms, and the stream between
    them is the collapsed stream plus the first terms: innovation == sum(terms), mid == collapsed + sum(mid_terms)."""
    gaps = Gaps()
    for (layer, _step), values in _summed_steps(model).items():
        names = (values["output"], *values["terms"], *((values["collapsed"], values["mid"]) if "mid" in values else ()))
        if not all(layer in available(model, name) for name in names):
            continue
        # one trace per value, as streams_follow_from_mixing reads them
        found = {name: read(model, case, [(layer, name)])[0] for name in dict.fromkeys(names)}
        terms = [found[name] for name in values["terms"]]
        summed = cast(torch.Tensor, sum(term.float() for term in terms))  # a tensor: a step adds one term at least
        gaps.add(
            expect_close(
                f"layers[{layer}]: {' + '.join(values['terms'])} against {values['output']}",
                summed,
                found[values["output"]].float(),
                dtype=coarsest(*found.values()),
            )
        )
        if "mid" in values:
            parts = [found[values["collapsed"]], *(found[name] for name in values["mid_terms"])]
            mid = cast(torch.Tensor, sum(part.float() for part in parts))  # a tensor: parts holds the collapsed stream
            gaps.add(
                expect_close(
                    f"layers[{layer}]: {values['collapsed']} + {' + '.join(values['mid_terms'])} against {values['mid']}",
                    mid,
                    found[values["mid"]].float(),
                    dtype=coarsest(*found.values()),
                )
            )
    if not gaps.count:
        raise Skip("no block serves a summed step's output beside every one of its terms")
    return str(gaps)


#: the steps of a generation the stream identity is held at
STEPS = 3


@check("generation", applies=multi_stream)
def streams_follow_at_every_step(model: StandardModel, case: Case) -> str:
    """Under generate, each step's streams have the step's length and follow from the mixing (streams_follow_from_mixing at every step)."""
    import nnsight

    from .base import input_shape

    sublayers = _sublayers(model, ("before", "after", "output", "spread", "mixing", "added"))
    prompt = case.alone(0)
    with (
        torch.no_grad(),
        model.generate(prompt.batch, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer,
    ):
        steps = nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            step = []
            for (layer, _sublayer), values in sublayers.items():
                block = model.layers[layer]
                unmixed = _unmixed(model, layer)
                order = in_order(values, ("before", "mixing", "spread", "output", "added", "after"))
                step.append(
                    {
                        name: get(block, values[name]).detach().clone()
                        for name in order
                        if not (name == "mixing" and unmixed)
                    }
                )
            steps.append(step)
    if len(steps) != STEPS:
        raise CheckFailure(f"read {len(steps)} steps of {STEPS}")
    length = input_shape(model, prompt)[1]
    gaps = Gaps()
    for index, step in enumerate(steps):
        expected = length if index == 0 else 1
        for ((layer, _sublayer), values), found in zip(sublayers.items(), step):
            if found["after"].shape[1] != expected:
                raise CheckFailure(
                    f"step {index}, layers[{layer}].{values['after']}: {found['after'].shape[1]} positions, expected {expected}"
                )
            mixed = _after(found, model, layer, values, _unmixed(model, layer))
            gaps.add(
                expect_close(
                    f"step {index}, layers[{layer}]: spread * output + mixed streams against {values['after']}",
                    mixed,
                    found["after"].float(),
                    dtype=coarsest(*found.values()),
                )
            )
    return f"{STEPS} steps; {gaps}"
