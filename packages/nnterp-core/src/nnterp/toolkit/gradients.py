"""Gradient methods on standard values: attribution patching and integrated gradients.

Both differentiate ``metric(logits)`` with respect to a standard value, read
in a trace as any other value, so they run on every family the kit passes.
The kit's ``gradients_are_derivatives`` and ``gradients_follow_the_stream``
check, on every family, that the gradient of a standard value is the metric's
derivative with respect to it and that it flows back along the stream.

    sweep = attribution_patching(model, clean, corrupted, metric, values="heads")
    sweep.normalized().values      # [layer, head], read like patch_heads's sweep

A gradient inside a trace of your own is read in nnsight's ``backward()``
form (``model.layers[1].layer_output.grad`` outside it raises
``GradientOutsideBackward`` with the form that works)::

    with model.trace(prompt):
        stream = model.layers[1].layer_output
        metric = model.logits[:, -1, token].sum()
        with metric.backward():
            gradient = stream.grad.save()
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import nnsight

import torch
from torch import Tensor
from tqdm.auto import tqdm

from .._gradients import track
from ..errors import Unavailable
from ..protocols import StandardModel
from . import _arguments
from ._packs import scalar as _scalar
from .names import standard_name
from .patching import STREAMS, Metric, Sweep, _check_prompts, _owner

#: the sites attribution patching estimates, by the name ``values=`` takes: the stream points, the contributions, the heads
SITES = {
    **{stream: stream for stream in STREAMS},
    "attention_output": "self_attn.attention_output",
    "mlp_output": "mlp.mlp_output",
    "heads": "self_attn.attention_head_outputs",
}
HEADS = SITES["heads"]


def _site(model: StandardModel, name: str, given: Any) -> str:
    """The standard value a ``values=`` entry names: a short name of ``SITES``, the dotted block value itself, or its
    TransformerLens hook (``"hook_resid_pre"``, ``"attn.hook_z"``)."""
    if name in SITES:
        return SITES[name]
    if name not in SITES.values():
        with contextlib.suppress(KeyError, ValueError):  # neither spelling: said below, with the names that work
            name = standard_name(model, name)
    if name in SITES.values():
        return name
    raise _arguments.InvalidArgument(
        "attribution_patching",
        "values",
        given,
        f"{name!r} is none of {sorted(SITES)} (or {sorted(set(SITES.values()) - set(STREAMS))})",
    )


def _differentiable(value: Any) -> Tensor:
    if not isinstance(value, Tensor) or value.numel() != 1 or not value.requires_grad:
        kind = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
        graph = " that does not depend on the logits" if isinstance(value, Tensor) and value.numel() == 1 else ""
        raise ValueError(
            f"the metric returned {kind}{graph}; a gradient method differentiates it, so it must return one number "
            "computed from the logits as a tensor (e.g. logits[:, -1, a].mean() - logits[:, -1, b].mean())"
        )
    return value


def _gradients(
    model: StandardModel, prompts: dict[str, Tensor], metric: Metric, site: str, layers: list[int], remote: bool | str
) -> tuple[float, list[Tensor], list[Tensor]]:
    """One trace with its backward: the metric, and ``site``'s value and gradient on each of ``layers``."""
    where, _, name = site.rpartition(".")
    values: list = []
    gradients: list = []
    metrics: list = []
    unreached: list = []
    with torch.enable_grad(), _arguments.left_padding(model), model.trace(prompts, remote=remote):
        nnsight.save(values), nnsight.save(gradients), nnsight.save(metrics), nnsight.save(unreached)
        track(model)  # a server's frozen weights track nothing: from the first block's stream on, as locally
        read = [getattr(_owner(model, layer, where), name) for layer in layers]
        values.extend(value.detach().clone() for value in read)
        scalar = _differentiable(metric(model.logits))
        metrics.append(scalar.detach())
        # what `with scalar.backward(): value.grad` reads (the kit's gradients_are_derivatives holds the two equal),
        # taken directly so that a value no gradient reaches is said, not waited for
        unreached.extend(layer for layer, value in zip(layers, read) if not value.requires_grad)
        found = torch.autograd.grad(scalar, read, allow_unused=True) if not unreached else ()
        unreached.extend(layer for layer, gradient in zip(layers, found) if gradient is None)
        gradients.extend(gradient.detach() for gradient in found if gradient is not None)
    if unreached:
        raise Unavailable(
            model.layers[unreached[0]],
            site,
            "no gradient reaches it on this family: the tensor served is not the one the model computes the logits "
            "from (the kit's gradients_are_derivatives says which values hold); patch it with the activation patching functions",
        )
    return _scalar(metrics[0]), values, gradients


def _read(
    model: StandardModel, prompts: dict[str, Tensor], metric: Metric, site: str, layers: list[int], remote: bool | str
) -> tuple[float, list[Tensor]]:
    where, _, name = site.rpartition(".")
    values: list = []
    metrics: list = []
    with torch.no_grad(), _arguments.left_padding(model), model.trace(prompts, remote=remote):
        nnsight.save(values), nnsight.save(metrics)
        values.extend(getattr(_owner(model, layer, where), name).detach().clone() for layer in layers)
        metrics.append(metric(model.logits))
    return _scalar(metrics[0]), values


def attribution_patching(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    *,
    values: str | Sequence[str] = "heads",
    layers: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    progress: bool = True,
    remote: bool | str = False,
) -> Sweep | dict[str, Sweep]:
    """Every patch of a sweep estimated at once from one gradient: ``metric(corrupted) + (clean - corrupted) . grad``.

    The first-order estimate of activation patching: for each site (a layer
    and a position, or a layer and a head), the metric the corrupted run would
    have with the clean value written there is approximated by the corrupted
    metric plus the clean-minus-corrupted difference of the value dotted with
    the metric's gradient in the corrupted run, summed over the batch and over
    the site's other axes. So the result is a ``Sweep`` read exactly as
    ``patch_residual``'s or ``patch_heads``'s (``normalized()`` included), for
    two traces and one backward per value instead of one trace per cell.

    ``values`` names what is patched: ``"layer_input"``, ``"layer_mid"``,
    ``"layer_output"``, ``"attention_output"``, ``"mlp_output"`` (a
    ``[layer, position]`` Sweep each) or ``"heads"``
    (``self_attn.attention_head_outputs``, a ``[layer, head]`` Sweep; needs eager
    attention), or the same by TransformerLens hook (``"hook_resid_pre"``, ``"attn.hook_z"``). A list of names returns a dict of Sweeps by name. ``metric``
    maps the logits ``[batch, seq, vocab_size]`` to one number as a tensor
    (it is differentiated, so it must be computed from the logits).
    ``layers`` and ``positions`` pick rows and columns as in ``patch_residual``
    (each prompt's positions, the batch left-padded; out of range refused);
    for ``"heads"``, ``positions`` picks the positions a head is patched at
    (all by default): each cell estimates patching that head there only, its
    attribution summed over those positions. The estimate is exact where the metric is linear in the value; it is
    known to underestimate patches that saturate a softmax or a norm, so
    confirm its top sites with the activation patching functions.
    """
    function = "attribution_patching"
    clean_batch, corrupted_batch, tokens = _check_prompts(model, clean, corrupted, function)
    names = [values] if isinstance(values, str) else list(values) if isinstance(values, (list, tuple)) else None
    if not names or not all(isinstance(name, str) for name in names):
        raise _arguments.InvalidArgument(
            function, "values", values, f"expected a name of {sorted(SITES)} or a list of them"
        )
    sites = {name: _site(model, name, values) for name in names}
    chosen = _arguments.layers(model, layers, function=function)
    columns = _arguments.positions(positions, len(tokens), function=function)
    order = sorted(set(chosen))
    sweeps = {}
    for name, site in tqdm(sites.items(), desc="attribution patching", disable=not progress or len(sites) == 1):
        metric_clean, clean_values = _read(model, clean_batch.inputs, metric, site, order, remote)
        metric_corrupted, corrupted_values, gradients = _gradients(
            model, corrupted_batch.inputs, metric, site, order, remote
        )
        per_layer = {}
        for layer, source, base, gradient in zip(order, clean_values, corrupted_values, gradients):
            product = ((source.to(base.device).float() - base.float()) * gradient.float()).sum(
                0
            )  # [seq, ...]: over the batch
            # heads: patched at the chosen positions only, so their terms summed there; the stream: one cell per position
            per_layer[layer] = (
                product[sorted(set(columns))].flatten(2).sum(-1).sum(0)
                if site == HEADS
                else product.flatten(1).sum(-1)[columns]
            )
        if site == HEADS:
            width = max(len(cells) for cells in per_layer.values())
            labels = [str(head) for head in range(width)]
            axis = "head"
        else:
            width, labels, axis = len(columns), [tokens[position] for position in columns], "position"
        grid = torch.full((len(chosen), width), float("nan"), dtype=torch.float32)
        for row, layer in enumerate(chosen):
            cells = per_layer[layer].cpu()
            grid[row, : len(cells)] = metric_corrupted + cells
        sweeps[name] = Sweep(
            grid,
            ("layer", axis),
            {"layer": [str(layer) for layer in chosen], axis: labels},
            metric_clean,
            metric_corrupted,
            site,
        )
    return sweeps[names[0]] if isinstance(values, str) else sweeps


@dataclass(frozen=True)
class IntegratedGradients:
    """Integrated-gradients attributions of a metric to one standard value, and how well they add up.

    ``attributions`` has the value's shape (``[batch, seq, hidden_size]`` for
    a stream value): ``(value - baseline) * mean of the gradient along the
    straight path from baseline to value``. Completeness says their sum is
    ``metric - metric_baseline``; ``error`` is how far the sum is from it, the
    integration error of ``steps`` midpoint samples (it shrinks as steps grow).
    """

    attributions: Tensor
    metric: float
    metric_baseline: float
    steps: int
    site: str

    @property
    def error(self) -> float:
        """``|attributions.sum() - (metric - metric_baseline)|``: the integration error."""
        return abs(float(self.attributions.double().sum()) - (self.metric - self.metric_baseline))

    @property
    def relative_error(self) -> float:
        """``error`` as a fraction of ``|metric - metric_baseline|`` (inf when the two metrics are equal)."""
        gap = abs(self.metric - self.metric_baseline)
        return self.error / gap if gap else float("inf")


def _split(model: StandardModel, value: str) -> tuple[int, str]:
    """``"layers.3.layer_output"`` as ``(3, "layer_output")``, the index checked against the model's blocks."""
    function = "integrated_gradients"
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) < 3 or parts[0] != "layers" or not parts[1].lstrip("-").isdigit():
        raise _arguments.InvalidArgument(
            function, "value", value, "expected a block value as 'layers.<index>.<name>' (e.g. 'layers.1.layer_output')"
        )
    try:
        layer = _arguments.layer(model, int(parts[1]), function=function, argument="value")
    except _arguments.InvalidArgument as error:
        raise _arguments.InvalidArgument(
            function, "value", value, f"block {parts[1]}: " + str(error).split("): ", 1)[1]
        ) from None
    return layer, ".".join(parts[2:])


def integrated_gradients(
    model: StandardModel,
    prompts: str | Sequence[str],
    metric: Metric,
    value: str,
    *,
    baseline: Tensor | str | Sequence[str] | None = None,
    steps: int = 32,
    progress: bool = True,
    remote: bool | str = False,
) -> IntegratedGradients:
    """Integrated gradients of ``metric(logits)`` with respect to one standard value of one block.

    ``value`` is a block value by its cache name (``"layers.1.layer_output"``,
    ``"layers.0.self_attn.attention_head_outputs"``). The value is replaced by
    ``baseline + alpha * (value - baseline)`` for ``steps`` midpoints alpha in
    (0, 1), one trace each; each trace's gradient there is averaged and
    multiplied by ``value - baseline``. ``prompts`` are strings or token ids
    (left-padded into one batch). ``baseline`` is zeros by default, a float
    tensor broadcastable to the value, or prompts (strings or ids, tokenizing
    to the same lengths as ``prompts``) whose own value is the baseline (the
    corrupted run of a patching experiment). The result reports the integration error.
    """
    function = "integrated_gradients"
    _arguments.outside_trace(function)
    steps = _arguments.count(steps, function=function, argument="steps")
    layer, name = _split(model, value)
    where, _, attribute = name.rpartition(".")
    if baseline is None or (isinstance(baseline, Tensor) and baseline.is_floating_point()):
        batch = _arguments.prompts(model, prompts, function=function)
    else:  # prompts (strings or ids) whose own value is the baseline
        batch, against, _ = _check_prompts(model, prompts, baseline, function)
        _, (baseline,) = _read(model, against.inputs, lambda logits: 0.0, name, [layer], remote)
    inputs = batch.inputs
    metric_value, (reached,) = _read(model, inputs, metric, name, [layer], remote)
    start = (
        torch.zeros_like(reached)
        if baseline is None
        else torch.as_tensor(baseline).to(reached.device, reached.dtype).expand_as(reached)
    )
    path = reached - start

    def at(alpha: float, gradient: bool) -> tuple[float, Tensor | None]:
        found: list = []
        with torch.enable_grad(), _arguments.left_padding(model), model.trace(inputs, remote=remote):
            nnsight.save(found)
            owner = _owner(model, layer, where)
            original = getattr(owner, attribute)
            point = (start + alpha * path).to(device=original.device, dtype=original.dtype).requires_grad_(gradient)
            setattr(owner, attribute, point)
            scalar = metric(model.logits)
            if gradient:
                (grad,) = torch.autograd.grad(_differentiable(scalar), point)
                found.append(grad.detach().float())
            found.insert(0, torch.as_tensor(scalar).detach())
        return _scalar(found[0]), (found[1] if gradient else None)

    metric_baseline, _ = at(0.0, gradient=False)
    total = torch.zeros(path.shape, dtype=torch.float32, device=path.device)
    for step in tqdm(range(steps), desc=f"integrated gradients of {value}", disable=not progress):
        _, gradient = at((step + 0.5) / steps, gradient=True)
        total += cast(Tensor, gradient).to(total.device)  # at(..., gradient=True) returns one
    attributions = (path.float() * total / steps).cpu()
    return IntegratedGradients(attributions, metric_value, metric_baseline, steps, value)
