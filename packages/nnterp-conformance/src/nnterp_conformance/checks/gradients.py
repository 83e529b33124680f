"""Gradients: what ``.grad`` reads inside ``backward()`` is the metric's derivative, and it flows back along the stream.

A served value a forward identity cannot tell from the model's own (a
detached tensor, or a copy read beside it) still sums and still edits, but no
gradient reaches it; and a stream value that is not the one the next block
reads carries a gradient that is not the stream's. These checks differentiate
one fixed scalar of the logits (a random direction over the last position's
vocabulary) and compare nnsight's ``.grad`` with ``torch.autograd.grad`` on
the same tensors, then the gradients with each other along the residual stream.
"""

from __future__ import annotations

import re
from typing import Any

from nnsight.intervention.interleaver import OutOfOrderError
from nnterp.protocols import StandardModel
from nnterp.reasons import PARALLEL
from nnterp.tolerances import coarsest

import torch

from .base import Case, CheckFailure, Gaps, Skip, available, check, expect_close, get, mixers_of, model_dtype, sublayers

#: the block values whose gradients are checked: the stream's three points, the contributions added to it, and the
#: attention's heads (what attribution patching over heads differentiates)
STREAM = ("layer_input", "layer_mid", "layer_output")
HEADS = ("self_attn.attention_head_outputs",)


def metric(logits: torch.Tensor) -> torch.Tensor:
    """The scalar the checks differentiate: the last position's logits against a fixed random direction, in float32."""
    generator = torch.Generator().manual_seed(0)
    direction = torch.randn(logits.shape[-1], generator=generator).to(logits.device)
    return (logits[:, -1].float() * direction).sum()


def _descriptor(model: StandardModel, layer: int, name: str) -> Any:
    """The descriptor serving the block value ``name`` (dotted, ``"mlp.mlp_neurons"``) on block ``layer``."""
    host, _, attribute = f".{name}".rpartition(".")
    return type(get(model.layers[layer], host[1:]) if host else model.layers[layer]).values()[attribute]


def _writable(model: StandardModel, layer: int, name: str) -> bool:
    return _descriptor(model, layer, name).read_only is None


def differentiable(model: StandardModel) -> dict[str, list[int]]:
    """Each stream value, contribution and the heads, with the blocks that serve it read from the model (not derived);
    ``Skip`` if none."""
    names = dict.fromkeys(STREAM)
    for layer in range(model.num_layers):
        names.update(dict.fromkeys(sublayers(model, layer)))
    names.update(dict.fromkeys(HEADS))
    found = {}
    for name in names:
        blocks = [layer for layer in available(model, name) if _writable(model, layer, name)]
        if blocks:
            found[name] = blocks
    if not found:
        raise Skip("no block serves a stream value or a contribution read from the model")
    return found


def gradients(
    model: StandardModel, case: Case, name: str, blocks: list[int]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``name``'s gradient on each of ``blocks``: as ``torch.autograd.grad`` computes it, and as ``.grad`` serves it.

    One trace: the values are read in block order, the metric's derivative is
    taken directly (keeping the graph), then ``backward()`` runs and each
    ``.grad`` is read in the order the backward reaches it (the last block first).
    """
    direct: list = []
    served: list = []
    unused: list = []
    with model.trace(case.batch):
        values = [get(model.layers[layer], name) for layer in blocks]
        scalar = metric(model.logits)
        unused.extend(layer for layer, value in zip(blocks, values) if not value.requires_grad)  # off autograd's record
        found = torch.autograd.grad(scalar, values, retain_graph=True, allow_unused=True) if not unused else ()
        unused.extend(layer for layer, gradient in zip(blocks, found) if gradient is None)
        if not unused:
            direct.extend(gradient.detach().clone() for gradient in found)
            with scalar.backward():
                for value in reversed(values):
                    served.append(value.grad.detach().clone())
    if unused:
        raise CheckFailure(
            f"layers[{unused[0]}].{name} is not on the path from the model's inputs to its logits: no gradient can reach "
            "it (a copy or a detached tensor is served instead of the one the model computes with)"
        )
    return direct, served[::-1]


@check("gradients", drawn=False)
def gradients_are_derivatives(model: StandardModel, case: Case) -> str:
    """.grad read inside backward() on every stream value, contribution and the heads equals torch.autograd.grad of the same metric."""
    gaps = Gaps()
    for name, blocks in differentiable(model).items():
        direct, served = gradients(model, case, name, blocks)
        for layer, expected, actual in zip(blocks, direct, served):
            gaps.add(
                expect_close(
                    f"layers[{layer}].{name}.grad against torch.autograd.grad",
                    actual,
                    expected,
                    dtype=coarsest(expected, model_dtype(model)),
                )
            )
    return str(gaps)


def _added_into(model: StandardModel, layer: int, served: dict[str, list[int]]) -> dict[str, str]:
    """Each contribution of block ``layer`` with the stream point it is added into, where the block says which.

    The mixers add into ``layer_mid`` where the block serves it, the MLP (or a
    block's last sublayer) into ``layer_output``; every sublayer of a parallel
    block adds into ``layer_output``. A term the block reads back after adding it
    (``Layer.read_again``: Gemma 4's MLP, which its per-layer branch gates on)
    is added into a point no value serves, and is left out.
    """
    terms = sublayers(model, layer)
    read_again = getattr(model.layers[layer], "read_again", None)
    gated_on = read_again() if read_again is not None else ()
    mid = layer in served.get("layer_mid", ())
    parallel = (model.support().get("layer_mid") or {}).get(layer) == PARALLEL
    mixers = {f"{mixer}.attention_output" for mixer in mixers_of(model, layer)}
    found = {}
    for index, term in enumerate(terms):
        if parallel or (mid and term not in mixers) or (not mid and index == len(terms) - 1):
            found[term] = "layer_output"
        elif mid and term in mixers:
            found[term] = "layer_mid"
    found = {term: point for term, point in found.items() if not (term in gated_on and point == "layer_output")}
    return {
        term: point for term, point in found.items() if layer in served.get(term, ()) and layer in served.get(point, ())
    }


def _output_scale(model: StandardModel, layer: int) -> torch.Tensor | None:
    """The factor block ``layer`` multiplies its summed stream by where it has one (``ScaledOutputLayer``), else None."""
    block = model.layers[layer]
    scale = getattr(block, "output_scale", None)
    if scale is None or not block.has_term("layer_output_rescaling"):
        return None
    return torch.as_tensor(scale()).detach()


def _through_blocks(
    model: StandardModel, case: Case, blocks: list[int], leaving: dict[int, torch.Tensor]
) -> dict[int, torch.Tensor]:
    """Each block's ``layer_output`` gradient carried back to its ``layer_input`` through the block itself (``torch.autograd.grad``)."""
    found: list = []
    with model.trace(case.batch):
        pairs = [(model.layers[layer].layer_input, model.layers[layer].layer_output) for layer in blocks]
        for layer, (entering, output) in zip(blocks, pairs):
            (carried,) = torch.autograd.grad(
                output, entering, grad_outputs=leaving[layer].to(output.dtype), retain_graph=True, allow_unused=True
            )
            found.append(None if carried is None else carried.detach().clone())
    return dict(zip(blocks, found))


def _stream_gradients(
    model: StandardModel, case: Case
) -> tuple[dict[str, list[int]], dict[str, dict[int, torch.Tensor]]]:
    served = differentiable(model)
    if "layer_output" not in served:
        reasons = model.support().get("layer_output") or {}
        raise Skip(
            f"no block serves layer_output read from the model ({next(iter(reasons.values()), 'it is derived')})"
        )
    served = {name: blocks for name, blocks in served.items() if name not in HEADS}
    return served, {name: dict(zip(blocks, gradients(model, case, name, blocks)[1])) for name, blocks in served.items()}


@check("gradients", drawn=False)
def gradients_follow_the_stream(model: StandardModel, case: Case) -> str:
    """Each contribution's gradient is that of the stream point it is added into, and a block's layer_input gets the gradient the block before's layer_output gets."""
    served, grads = _stream_gradients(model, case)
    dtype = model_dtype(model)
    gaps = Gaps()
    for layer in range(model.num_layers):
        for term, point in _added_into(model, layer, served).items():
            expected, said = grads[point][layer], f"{point}.grad"
            scale = _output_scale(model, layer) if point == "layer_output" else None
            if scale is not None:
                # added before the block multiplies its summed stream (Gemma 4's layer_scalar): it reaches the stream scaled
                expected, said = expected * scale.to(expected), f"output_scale * {said}"
            gaps.add(
                expect_close(f"layers[{layer}].{term}.grad against {said}", grads[term][layer], expected, dtype=dtype)
            )
        if layer + 1 in grads.get("layer_input", {}) and layer in grads["layer_output"]:
            gaps.add(
                expect_close(
                    f"layers[{layer + 1}].layer_input.grad against layers[{layer}].layer_output.grad",
                    grads["layer_input"][layer + 1],
                    grads["layer_output"][layer],
                    dtype=dtype,
                )
            )
    if not gaps.count:
        raise Skip(
            "no block serves a contribution beside the stream point it is added into, nor the stream on both sides of a boundary"
        )
    return str(gaps)


@check("gradients", drawn=False)
def gradient_flows_back_through_each_block(model: StandardModel, case: Case) -> str:
    """layer_input.grad is layer_output.grad carried back through the block: the sum of what flows through its skip and each sublayer."""
    _served, grads = _stream_gradients(model, case)
    both = [layer for layer in grads.get("layer_input", {}) if layer in grads["layer_output"]]
    beside = {layer: model.layers[layer].read_beside_the_stream() for layer in both}
    blocks = [layer for layer in both if beside[layer] is None]
    if not blocks:
        reasons = sorted({reason for reason in beside.values() if reason})
        raise Skip(
            f"later blocks read each block's input beside the stream: {'; '.join(reasons)}"
            if reasons
            else "no block serves both its layer_input and its layer_output read from the model"
        )
    dtype = model_dtype(model)
    gaps = Gaps()
    for layer, carried in _through_blocks(model, case, blocks, grads["layer_output"]).items():
        if carried is None:
            raise CheckFailure(
                f"layers[{layer}].layer_output does not depend on layers[{layer}].layer_input in the model's graph"
            )
        gaps.add(
            expect_close(
                f"layers[{layer}].layer_input.grad against layer_output.grad carried back through the block",
                grads["layer_input"][layer],
                carried,
                dtype=dtype,
            )
        )
    skipped = len(both) - len(blocks)
    return str(gaps) + (f" ({skipped} blocks read beside the stream left out)" if skipped else "")


#: why a value is left out of the interior check before it is read, by what its descriptor says
DERIVED = "read-only: derived from other served values (or read off the inputs), whose gradients are checked instead"
NOT_FLOATING = "not a floating tensor (indices, masks): it has no derivative"
NOT_SERVED = "None on this call (a state before any call)"


def spelled(path: str) -> str:
    """A value's dotted path below the model as a user writes it: ``"vision.layers.2.mlp.mlp_neurons"`` ->
    ``"vision.layers[2].mlp.mlp_neurons"``."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", path)


def interior(model: StandardModel) -> tuple[list[str], dict[str, str]]:
    """Every available block value ``gradients_are_derivatives`` does not take (the sublayers' interiors, a block's
    norms, streams and weights), as a path below the model (``"layers.2.mlp.mlp_neurons"``) in forward order; and why
    each left out by its declaration is."""
    from nnterp.toolkit.cache import block_order

    taken: list[str] = []
    left: dict[str, str] = {}
    for layer in range(model.num_layers):
        covered = {*STREAM, *HEADS, *sublayers(model, layer)}
        support = model.support(layer=layer)
        for name in block_order(model.layers[layer]):
            if name in covered or support.get(name, "unknown") is not None:
                continue
            reason = left_out(_descriptor(model, layer, name))
            if reason is None:
                taken.append(f"layers.{layer}.{name}")
            else:
                left.setdefault(name, reason)
    return taken, left


def left_out(value: Any) -> str | None:
    """Why the interior check leaves the value a descriptor serves out, by what it declares; None where it takes it."""
    return getattr(value, "off_the_graph", None) or (DERIVED if value.read_only is not None else None)


def _reached_in(order: list[int], values: list[torch.Tensor], scalar: torch.Tensor) -> list[int]:
    """The indices of ``values`` in the order a backward from ``scalar`` reaches them (each tensor once)."""
    reached: list[int] = []
    if not order:
        return reached
    seen: set[int] = set()
    handles = []
    for index in order:
        if id(values[index]) not in seen:
            seen.add(id(values[index]))
            handles.append(values[index].register_hook(lambda gradient, index=index: reached.append(index)))
    try:
        torch.autograd.grad(scalar, [values[index] for index in order], retain_graph=True, allow_unused=True)
    finally:
        for handle in handles:
            handle.remove()
    return reached


def interior_gradients(
    model: StandardModel, inputs: tuple[Any, dict], plan: list[str], separate: bool = False
) -> tuple[dict, dict, dict[str, str]]:
    """Each value of ``plan`` (paths below the model): its gradient by ``torch.autograd.grad``, by ``.grad`` inside
    ``backward()``, and, for a value no gradient reaches or that is not a floating tensor, why.

    One trace of ``inputs`` (the prompts and the invoke's keyword arguments, ``images=``):
    the values are read in forward order (``separate``: each by a worker of
    its own, which needs no order), the metric differentiated directly, the
    order the backward reaches each value recorded with plain hooks, then
    ``backward()`` runs and each ``.grad`` is read in that order.
    """
    direct: dict = {}
    served: dict = {}
    off: dict = {}
    values: list = [None] * len(plan)
    prompts, kwargs = inputs

    def take(index: int) -> None:
        values[index] = get(model, plan[index])

    with model.trace() as tracer:
        with tracer.invoke(prompts, **kwargs):
            if not separate:
                for index in range(len(plan)):
                    take(index)
            scalar = metric(model.logits)
            kept = []
            for index, (place, value) in enumerate(zip(plan, values)):
                if not isinstance(value, torch.Tensor):
                    off[place] = NOT_SERVED
                elif not value.is_floating_point():
                    off[place] = NOT_FLOATING
                elif not value.requires_grad:
                    off[place] = "off autograd's record (served detached, or computed without gradients)"
                else:
                    kept.append(index)
            found = (
                torch.autograd.grad(scalar, [values[index] for index in kept], retain_graph=True, allow_unused=True)
                if kept
                else ()
            )
            for index, gradient in zip(kept, found):
                if gradient is None:
                    off[plan[index]] = "the logits do not depend on the tensor served"
                else:
                    direct[plan[index]] = gradient.detach().clone()
            order = _reached_in([index for index in kept if plan[index] in direct], values, scalar)
            if order:
                with scalar.backward():
                    for index in order:
                        served[plan[index]] = values[index].grad.detach().clone()
            # a tensor served under two names is reached once: its gradient is the same
            first = {id(values[index]): plan[index] for index in reversed(order)}
            for index in kept:
                if plan[index] in direct and plan[index] not in served and id(values[index]) in first:
                    served[plan[index]] = served[first[id(values[index])]]
        if separate:
            for index in range(len(plan)):
                with tracer.invoke():
                    take(index)
    return direct, served, off


def _in_order_or_apart(
    model: StandardModel, inputs: tuple[Any, dict], plan: list[str]
) -> tuple[dict, dict, dict[str, str]]:
    """``interior_gradients`` with one worker reading in the components' declaration order, else (a family whose
    forward serves its values in another order) with a worker per value."""
    try:
        return interior_gradients(model, inputs, plan)
    except OutOfOrderError:
        return interior_gradients(model, inputs, plan, separate=True)


def derivatives_gaps(model: StandardModel, found: tuple[dict, dict, dict[str, str]], left: dict[str, str]) -> str:
    """The gaps between each value's ``.grad`` and its ``torch.autograd.grad`` (``found``, as ``interior_gradients``
    returns them); a failure naming the first value the plan took that no gradient reaches."""
    direct, served, off = found
    unreached = {place: why for place, why in off.items() if why not in (NOT_SERVED, NOT_FLOATING)}
    if unreached:
        place, why = next(iter(unreached.items()))
        raise CheckFailure(
            f"{spelled(place)} is not on the path from the model's inputs to its logits: {why}; no gradient can reach "
            f"it ({len(unreached)} values so: {', '.join(map(spelled, list(unreached)[:8]))}{' ...' if len(unreached) > 8 else ''}; "
            "a value beside the graph by design says why in its declaration, off_the_graph=)"
        )
    gaps = Gaps()
    dtype = model_dtype(model)
    for place, expected in direct.items():
        gaps.add(
            expect_close(
                f"{spelled(place)}.grad against torch.autograd.grad",
                served[place],
                expected,
                dtype=coarsest(expected, dtype),
            )
        )
    skipped = {why for why in off.values()} | set(left.values())
    return str(gaps) + (f" ({len(off) + len(left)} values left out: {'; '.join(sorted(skipped))})" if skipped else "")


@check("gradients", drawn=False)
def interior_gradients_are_derivatives(model: StandardModel, case: Case) -> str:
    """.grad read inside backward() on every other floating block value (queries, neurons, routers, states...) equals torch.autograd.grad of the same metric."""
    plan, left = interior(model)
    if not plan:
        raise Skip(
            "no block serves an interior value beside the stream, its contributions and the heads"
            + (f" ({len(left)} left out by declaration)" if left else "")
        )
    return derivatives_gaps(model, _in_order_or_apart(model, (case.batch, {}), plan), left)
