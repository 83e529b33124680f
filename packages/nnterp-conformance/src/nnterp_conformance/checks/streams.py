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
"""

from __future__ import annotations

from typing import Any

import torch

from nnterp.tolerances import coarsest

from .base import Case, CheckFailure, Gaps, Skip, available, check, expect_close, get, multi_stream, read

#: per sublayer: the streams around it, its output, and the names of its weights (``StreamLayer``'s)
SUBLAYERS: dict[str, dict[str, str]] = {
    "self_attn": {
        "before": "layer_input", "after": "layer_mid", "output": "self_attn.attention_output",
        "collapse": "attention_collapse_weights", "collapsed": "attention_collapsed",
        "spread": "attention_spread_weights", "mixing": "attention_stream_mixing",
    },
    "mlp": {
        "before": "layer_mid", "after": "layer_output", "output": "mlp.mlp_output",
        "collapse": "mlp_collapse_weights", "collapsed": "mlp_collapsed",
        "spread": "mlp_spread_weights", "mixing": "mlp_stream_mixing",
    },
}


def _unmixed(model: Any, layer: int) -> bool:
    """Whether block ``layer`` carries its streams past the sublayers unmixed (its ``UNMIXED`` reason is set)."""
    return getattr(type(model.layers[layer]), "UNMIXED", None) is not None


def _sublayers(model: Any, names: tuple[str, ...]) -> dict[tuple[int, str], dict[str, str]]:
    """``(layer, sublayer)`` -> its names, where the block serves every value of ``names`` (the mixing may be the identity)."""
    found = {}
    for layer in range(model.num_layers):
        for sublayer, values in SUBLAYERS.items():
            if not hasattr(model.layers[layer], sublayer):
                continue
            needed = [values[name] for name in names if not (name == "mixing" and _unmixed(model, layer))]
            if all(layer in available(model, name) for name in needed):
                found[(layer, sublayer)] = values
    if not found:
        support = model.support()
        wanted = {values[name] for values in SUBLAYERS.values() for name in names}
        reasons = {name: support.get(name) for name in sorted(wanted) if support.get(name)}
        raise Skip(f"no multi-stream block serves {', '.join(names)} ({reasons})")
    return found


def collapse(weights: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """``sum_j weights[..., j] * streams[..., j, :]``: the one stream the weights collapse the streams into, in float32."""
    return (weights.float().unsqueeze(-1) * streams.float()).sum(dim=-2)


def spread_and_mix(spread: torch.Tensor, output: torch.Tensor, mixing: torch.Tensor | None, streams: torch.Tensor) -> torch.Tensor:
    """``spread[k] * output + sum_j mixing[j, k] * streams[j]`` in float32: the streams after a sublayer (``mixing``
    None: carried unmixed)."""
    carried = streams.float() if mixing is None else torch.einsum("bsjk,bsjh->bskh", mixing.float(), streams.float())
    return spread.float().unsqueeze(-1) * output.float().unsqueeze(-2) + carried


def _value(found: dict[str, torch.Tensor], values: dict[str, str], name: str, unmixed: bool) -> torch.Tensor | None:
    return None if name == "mixing" and unmixed else found[values[name]]


@check("streams", applies=multi_stream)
def streams_follow_from_mixing(model: Any, case: Case) -> str:
    """The streams after each sublayer are its output spread by its spread weights plus the streams before it mixed:
    after[k] == spread[k] * output + sum_j mixing[j, k] * before[j]."""
    sublayers = _sublayers(model, ("before", "after", "output", "spread", "mixing"))
    gaps = Gaps()
    for (layer, sublayer), values in sublayers.items():
        unmixed = _unmixed(model, layer)
        names = [values[name] for name in ("before", "after", "output", "spread", "mixing") if not (name == "mixing" and unmixed)]
        # one trace per value: no forward order is assumed between them, so a value read at the wrong place still
        # reads, and the identity is what fails
        found = {name: read(model, case, [(layer, name)])[0] for name in names}
        expected = spread_and_mix(found[values["spread"]], found[values["output"]], _value(found, values, "mixing", unmixed), found[values["before"]])
        terms = f"{values['spread']} * {values['output']} + {'' if unmixed else values['mixing'] + '^T @ '}{values['before']}"
        gaps.add(expect_close(f"layers[{layer}]: {terms} against {values['after']}", expected, found[values["after"]].float(), dtype=coarsest(*found.values())))
    return str(gaps)


@check("streams", applies=multi_stream)
def sublayers_read_the_collapse(model: Any, case: Case) -> str:
    """What each sublayer reads is the streams before it collapsed by its collapse weights:
    collapsed == sum_j collapse[j] * before[j], and its pre-norm is called with it."""
    sublayers = _sublayers(model, ("before", "collapse", "collapsed"))
    gaps = Gaps()
    for (layer, sublayer), values in sublayers.items():
        before, weights, collapsed = (read(model, case, [(layer, values[name])])[0] for name in ("before", "collapse", "collapsed"))
        gaps.add(expect_close(f"layers[{layer}]: sum_j {values['collapse']}[j] * {values['before']}[j] against {values['collapsed']}",
                              collapse(weights, before), collapsed.float(), dtype=coarsest(before, weights, collapsed)))
        norm = "input_layernorm" if sublayer == "self_attn" else "post_attention_layernorm"
        if norm in model.layers[layer].__dict__:
            (entering,) = read(model, case, [(layer, f"{norm}.input")])
            gaps.add(expect_close(f"layers[{layer}]: {values['collapsed']} against what {norm} is called with", collapsed, entering))
    return str(gaps)


def _written(model: Any, case: Case, layer: int, values: dict[str, str], written: str, unmixed: bool) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One run with ``written`` (a weight's name) assigned its edit: every value around the sublayer read after it, and the logits."""
    block = model.layers[layer]
    order = ("before", "collapse", "mixing", "spread", "collapsed", "output", "after")
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
def written_stream_weights_reach_the_model(model: Any, case: Case) -> str:
    """A written collapse, spread or mixing weight is what the model computes with (the identities hold with it in the
    same run), and it moves the logits: a read that is causally inert fails."""
    sublayers = _sublayers(model, ("before", "after", "output", "collapse", "collapsed", "spread", "mixing"))
    layer = case.pick(sorted({layer for layer, _ in sublayers}))
    with torch.no_grad(), model.trace(case.batch):
        clean = model.logits.detach().clone().save()
    gaps = Gaps()
    for (at, sublayer), values in sublayers.items():
        if at != layer:
            continue
        unmixed = _unmixed(model, layer)
        for weight in ("collapse", "spread", "mixing"):
            if weight == "mixing" and unmixed:
                continue
            found, logits = _written(model, case, layer, values, values[weight], unmixed)
            where = f"layers[{layer}] with {values[weight]} written"
            dtype = coarsest(*found.values())
            gaps.add(expect_close(f"{where}: sum_j {values['collapse']}[j] * {values['before']}[j] against {values['collapsed']}",
                                  collapse(found["collapse"], found["before"]), found["collapsed"].float(), dtype=dtype))
            expected = spread_and_mix(found["spread"], found["output"], found.get("mixing"), found["before"])
            gaps.add(expect_close(f"{where}: spread * output + mixed streams against {values['after']}", expected, found["after"].float(), dtype=dtype))
            if torch.equal(logits, clean):
                raise CheckFailure(f"{where}: the logits did not move (the written weight is not what the model computes with)")
    return str(gaps)


#: the steps of a generation the stream identity is held at
STEPS = 3


@check("generation", applies=multi_stream)
def streams_follow_at_every_step(model: Any, case: Case) -> str:
    """Under generate, each step's streams have the step's length and follow from the mixing (streams_follow_from_mixing at every step)."""
    import nnsight

    from .base import input_shape

    sublayers = _sublayers(model, ("before", "after", "output", "spread", "mixing"))
    order = ("before", "mixing", "spread", "output", "after")
    prompt = case.alone(0)
    with torch.no_grad(), model.generate(prompt.batch, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer:
        steps = nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            step = []
            for (layer, sublayer), values in sublayers.items():
                block = model.layers[layer]
                unmixed = _unmixed(model, layer)
                step.append({name: get(block, values[name]).detach().clone() for name in order if not (name == "mixing" and unmixed)})
            steps.append(step)
    if len(steps) != STEPS:
        raise CheckFailure(f"read {len(steps)} steps of {STEPS}")
    length = input_shape(model, prompt)[1]
    gaps = Gaps()
    for index, step in enumerate(steps):
        expected = length if index == 0 else 1
        for ((layer, sublayer), values), found in zip(sublayers.items(), step):
            if found["after"].shape[1] != expected:
                raise CheckFailure(f"step {index}, layers[{layer}].{values['after']}: {found['after'].shape[1]} positions, expected {expected}")
            mixed = spread_and_mix(found["spread"], found["output"], found.get("mixing"), found["before"])
            gaps.add(expect_close(f"step {index}, layers[{layer}]: spread * output + mixed streams against {values['after']}",
                                  mixed, found["after"].float(), dtype=coarsest(*found.values())))
    return f"{STEPS} steps; {gaps}"
