"""A vision tower's blocks and projector, value by value: the stream between the sublayers, the neurons, the norms' outputs,
and the projector's input, its output, and the tower stream the wrapper selects for it.

Each identity is read on the case's image batch (``vision.image_inputs``), on
every tower block that serves its values; a value a tower lacks makes the
check skip with the tower's own reason.
"""

from __future__ import annotations

import operator
from typing import Any

import nnsight
from nnsight.intervention.interleaver import OutOfOrderError
from nnterp.protocols import VisionModel
from nnterp.tolerances import coarsest

import torch

from .base import Case, Gaps, Skip, check, expect_close, get, model_dtype
from .vision import has_vision, image_inputs, image_token, tower_block


def tower_reads(model: VisionModel, case: Case, plan: list[tuple[Any, str]]) -> list[torch.Tensor]:
    """Each ``(host, name)`` of ``plan`` on the case's image batch: one trace in the plan's order, else one trace per
    value (a value pointed at the wrong place still reads, and the identity, not the order, is what fails)."""

    def one(chosen: list[tuple[Any, str]]) -> list[torch.Tensor]:
        prompts, images = image_inputs(model, case)
        with torch.no_grad(), model.trace(prompts, images=images):
            found = nnsight.save([get(host(model), name).detach().clone() for host, name in chosen])
        return list(found)

    try:
        return one(plan)
    except OutOfOrderError:
        return [one([step])[0] for step in plan]


def served_blocks(model: VisionModel, names: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
    """The blocks of ``names`` (block -> the values it needs) that serve every one; ``Skip`` with the reasons when none does."""
    support = model.vision.support()
    found = {
        layer: needed
        for layer, needed in names.items()
        if all(not support.get(name) or layer not in support[name] for name in needed)
    }
    if not found:
        wanted = dict.fromkeys(name for needed in names.values() for name in needed)
        reasons = {name: support.get(name) for name in wanted if support.get(name)}
        raise Skip(f"no tower block serves {', '.join(wanted)} ({reasons})")
    return found


def halves(block: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The terms a tower block adds before ``layer_mid`` (its ``mid_terms``) and after it (the rest of its ``contributions``)."""
    before = block.mid_terms()
    return before, tuple(term for term in block.contributions() if term not in before)


@check("vision", applies=has_vision)
def vision_mid_stream(model: VisionModel, case: Case) -> str:
    """On every tower block: layer_input + its mid terms (attention_output) == layer_mid, layer_mid + the rest (mlp_output) == layer_output.

    The terms are the block's declared ``mid_terms()`` and ``contributions()``,
    so a layer-scaled tower (InternViT's, timm's) holds it with the scaled
    contributions it serves.
    """
    needs = {}
    for layer in range(model.vision.num_layers):
        before, after = halves(model.vision.layers[layer])
        if any(term.endswith("attention_output") for term in before):
            needs[layer] = ("layer_input", *before, "layer_mid", *after, "layer_output")
    if not needs:
        # the tower's own reason where its blocks serve no stream (a convolutional tower's), else that none has a mixer
        served_blocks(
            model,
            dict.fromkeys(range(model.vision.num_layers), ("layer_input", "layer_mid", "self_attn.attention_output")),
        )
        raise Skip("no tower block adds an attention_output before its layer_mid (its mid_terms())")
    blocks = served_blocks(model, needs)
    plan = [(tower_block(layer), name) for layer, names in blocks.items() for name in names]
    values = iter(tower_reads(model, case, plan))
    gaps = Gaps()
    for layer, names in blocks.items():
        found = {name: next(values) for name in names}
        before, after = halves(model.vision.layers[layer])
        mid = found["layer_input"] + sum(found[term] for term in before)
        gaps.add(
            expect_close(
                f"vision.layers[{layer}]: layer_input + {' + '.join(before)} against layer_mid", mid, found["layer_mid"]
            )
        )
        out = found["layer_mid"] + sum(found[term] for term in after)
        gaps.add(
            expect_close(
                f"vision.layers[{layer}]: layer_mid + {' + '.join(after)} against layer_output",
                out,
                found["layer_output"],
            )
        )
    return str(gaps)


def _neurons(
    model: VisionModel, case: Case, layers: list[int], parts: tuple[str, ...]
) -> dict[int, dict[str, torch.Tensor]]:
    """Each tower block of ``layers``: its ``parts`` of the MLP identity (``activation``, ``up``, ``neurons``), in one trace, in the MLP's order."""
    from .mlp import mlp_parts

    prompts, images = image_inputs(model, case)
    with torch.no_grad(), model.trace(prompts, images=images):
        everything = nnsight.save({})
        for layer in layers:
            everything[layer] = mlp_parts(model.vision.layers[layer].mlp, parts)
    return dict(everything)


@check("vision", applies=has_vision)
def vision_neurons_make_contribution(model: VisionModel, case: Case) -> str:
    """On every tower block: mlp_neurons == mlp_activation (times up_proj on a gated MLP), and down_proj(mlp_neurons) is what down_proj returns."""
    blocks = served_blocks(
        model, dict.fromkeys(range(model.vision.num_layers), ("mlp.mlp_activation", "mlp.mlp_neurons"))
    )
    parts, gaps = ("activation", "up", "neurons"), Gaps()
    try:
        every = _neurons(model, case, list(blocks), parts)
    except OutOfOrderError:
        # the family reads them out of the MLP's order: one trace each, so the identity, not the order, is what fails
        every = {
            layer: {
                key: value for part in parts for key, value in _neurons(model, case, [layer], (part,))[layer].items()
            }
            for layer in blocks
        }
    for layer, found in every.items():
        up = found.get("up")
        expected = found["activation"] if up is None else found["activation"] * up
        formula = "mlp_activation" if up is None else "mlp_activation * up_proj.output"
        neurons = found["neurons"]
        expected = (
            expected.reshape(neurons.shape)
            if expected.shape != neurons.shape and expected.numel() == neurons.numel()
            else expected
        )
        judged = coarsest(neurons, model_dtype(model))
        gaps.add(
            expect_close(f"vision.layers[{layer}]: {formula} against mlp_neurons", neurons, expected, dtype=judged)
        )
        projected, output = found["projected"], found["output"]
        projected = projected.reshape(output.shape) if projected.numel() == output.numel() else projected
        gaps.add(
            expect_close(
                f"vision.layers[{layer}]: down_proj(mlp_neurons) against down_proj's output", projected, output
            )
        )
    return str(gaps)


@check("vision", applies=has_vision)
def vision_norm_outputs_feed_the_sublayers(model: VisionModel, case: Case) -> str:
    """On every tower block: attention_norm_output is what its attention is called with, mlp_norm_output what its MLP is (the block's norm_readers)."""
    support = model.vision.support()
    pairs = []
    for layer in range(model.vision.num_layers):
        block = model.vision.layers[layer]
        readers = type(block).norm_readers
        for norm, sublayer in (("attention_norm_output", "self_attn"), ("mlp_norm_output", "mlp")):
            if sublayer in block.__dict__ and not (support.get(norm) and layer in support[norm]):
                pairs.append((layer, norm, readers[norm].format(mixer="self_attn")))
    if not pairs:
        raise Skip(
            f"no tower block serves attention_norm_output or mlp_norm_output ({support.get('attention_norm_output')}; {support.get('mlp_norm_output')})"
        )
    plan = [(tower_block(layer), name) for layer, norm, called in pairs for name in (norm, called)]
    values, gaps = iter(tower_reads(model, case, plan)), Gaps()
    for layer, norm, called in pairs:
        output, read = next(values), next(values)
        if read.shape != output.shape and read.numel() == output.numel():
            read = read.view(
                output.shape
            )  # a packed tower's sublayer is called with [patches, width], the norm served [1, patches, width]
        gaps.add(
            expect_close(
                f"vision.layers[{layer}]: {norm} against what {called.rsplit('.', 1)[0]} is called with", output, read
            )
        )
    return str(gaps)


def _projector(model: VisionModel, case: Case) -> Any:
    """The wrapper's projector; ``Skip`` where no image reaches the model, or the projector serves neither value."""
    image_token(model, case)
    projector = model.projector
    support = projector.support()
    missing = {name: support.get(name) for name in ("projector_input", "projector_output") if support.get(name)}
    if missing:
        raise Skip(f"the projector does not serve {missing}")
    return projector


@check("vision", applies=has_vision)
def projector_maps_its_input(model: VisionModel, case: Case) -> str:
    """projector(projector_input) == projector_output: the projector module, called again on the served input (its other arguments as the wrapper gave them), returns the served output."""
    projector = _projector(model, case)
    prompts, images = image_inputs(model, case)
    with torch.no_grad(), model.trace(prompts, images=images):
        arguments = model.projector.inputs
        taken = model.projector.projector_input.detach().clone().save()
        given = model.projector.projector_output.detach().clone().save()
        arguments = nnsight.save(arguments)
    args, kwargs = arguments
    values = type(projector).values()
    put_back = values["projector_input"]._postprocess
    model_input = put_back(projector, taken) if put_back is not None else taken
    with torch.no_grad():
        raw = projector._module(model_input, *args[1:], **kwargs)
    served = values["projector_output"]._preprocess
    remade = served(projector, raw) if served is not None else raw
    if isinstance(remade, (tuple, list)):
        remade = remade[0]
    gap = expect_close("projector called on projector_input against projector_output", remade, given)
    return f"{tuple(taken.shape)} -> {tuple(given.shape)}, gap {gap:.3g}"


@check("vision", applies=has_vision)
def projector_reads_the_selected_stream(model: VisionModel, case: Case) -> str:
    """projector_input == the tower stream the wrapper's config selects (the projector's selection(): vision_feature_layer's hidden state, the class row dropped under 'default', several side by side)."""
    projector = _projector(model, case)
    selection = projector.selection()
    if isinstance(selection, str):
        raise Skip(f"projector_input is no tower value as it is: {selection}")
    vision = operator.attrgetter("vision")
    plan = [(vision, chosen.value) for chosen in selection] + [(lambda model: model.projector, "projector_input")]
    *streams, taken = tower_reads(model, case, plan)
    expected = projector.laid_out(
        torch.cat([stream[:, chosen.drop :] for stream, chosen in zip(streams, selection)], dim=-1)
    )
    if expected.shape != taken.shape and expected.numel() == taken.numel():
        expected = expected.reshape(taken.shape)  # a packed tower's [1, patches, width] handed on as [patches, width]
    said = " ++ ".join(
        f"vision.{chosen.value}" + (f"[:, {chosen.drop}:]" if chosen.drop else "") for chosen in selection
    )
    gap = expect_close(f"{said} against projector_input", taken, expected)
    return f"projector_input is {said}, gap {gap:.3g}"
