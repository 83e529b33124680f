"""The pack runner the sweeps share (patching, path patching, ablation): the prompts repeated once per cell in one forward.

A pack is one forward of the prompts stacked ``count`` times along the batch
axis; an ``edit(rows)`` callable changes each copy's rows (one slice per copy)
inside the trace, and ``metric`` reads each copy's logits alone, so each
cell's value is what one trace of that cell alone gives.
``nnterp.toolkit.packing`` plans how many cells a pack holds.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import nnsight

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..protocols import StandardModel
from . import _arguments
from ._arguments import Batch
from .packing import Packing, plan
from .steering import skip_layers

#: a metric maps the run's logits ``[batch, seq, vocab_size]`` to one number
Metric = Callable[[Tensor], "float | Tensor"]


def repeated(batch: Batch, count: int) -> dict[str, Tensor]:
    """``batch.inputs`` stacked ``count`` times along the batch axis."""
    return {key: value.repeat(count, 1) for key, value in batch.inputs.items()}


def scalar(value: Any) -> float:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"the metric returned a tensor of shape {tuple(value.shape)}; it must return one number "
                "(a float or a one-element tensor), e.g. reduce over the batch with .mean()"
            )
        return float(value.detach().float().cpu().item())
    return float(value)


def logits_to_keep(
    model: StandardModel, logits_at: int | Sequence[int] | None, seq: int, function: str
) -> dict[str, Any]:
    """The forward's keyword that computes the logits at ``logits_at`` alone (transformers' ``logits_to_keep``), or none.

    Checked before anything runs: the positions must be in range, in order
    and distinct, and the model's forward must take ``logits_to_keep``.
    """
    if logits_at is None:
        return {}
    positions = _arguments.positions(logits_at, seq, function=function, argument="logits_at")
    if len(set(positions)) != len(positions) or positions != sorted(positions):
        raise _arguments.InvalidArgument(
            function,
            "logits_at",
            logits_at,
            "positions out of order or repeated",
            "give the positions the metric reads, distinct and in order (e.g. [-1], or [3, 7]); they index the metric's logits in that order",
        )
    forward: Any = getattr(model._module, "forward", None)  # an nn.Module's: never None
    if "logits_to_keep" not in inspect.signature(forward).parameters:
        raise ValueError(
            f"logits_at: {type(model._module).__name__}.forward takes no logits_to_keep, so its logits cannot be "
            "computed at some positions alone; leave logits_at=None"
        )
    if positions == list(range(seq - len(positions), seq)):
        return {"logits_to_keep": len(positions)}
    return {"logits_to_keep": torch.tensor(positions)}


def planned(
    model: StandardModel,
    prompts: int,
    seq: int,
    *,
    logits_at: Any,
    cells_per_forward: int | None,
    memory_budget: int | None,
    function: str,
) -> tuple[dict[str, Any], list[int] | None, Packing]:
    """The packs' forward keyword (``logits_to_keep``), the positions the unpacked runs' metric reads (None: all), and the plan."""
    forward = logits_to_keep(model, logits_at, seq, function)
    at = None if logits_at is None else _arguments.positions(logits_at, seq, function=function, argument="logits_at")
    packing = plan(
        model,
        prompts,
        seq,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        logit_positions=None if at is None else len(at),
    )
    return forward, at, packing


def run_metric(
    model: StandardModel,
    prompts: dict[str, Tensor],
    metric: Metric,
    remote: bool | str,
    inside: Callable[[], Any] | None = None,
    at: list[int] | None = None,
) -> tuple[float, list]:
    """One trace of ``prompts``: ``inside()`` first (what it returns, values read in forward order, is kept), then the metric (of the logits at ``at`` only)."""
    saved: list = []
    metrics: list = []
    with _arguments.left_padding(model), model.trace(prompts, remote=remote):
        nnsight.save(saved), nnsight.save(metrics)  # the lists come back from a server by name, as any saved value
        if inside is not None:
            saved.extend(inside() or ())
        logits = model.logits
        metrics.append(metric(logits if at is None else logits[:, at]))
    return scalar(metrics[0]), saved


def skippable(model: StandardModel, layer: int) -> bool:
    """Whether a pack editing at ``layer`` may skip the blocks before it, handing on the unedited run's stream instead.

    Those blocks compute exactly what the unedited run computed (no edit acts
    before ``layer``), so their only output a later block reads is the stream
    entering ``layer``: unless one of them stores what a later block reuses
    (``skip_breaks``), hands a state on beside the stream (``carries``) or has
    later blocks read its input another way (``read_beside_the_stream``), or
    the block does not serve ``layer_input``.
    """
    if layer == 0:
        return False
    for index in range(layer):
        block = model.layers[index]
        if block.skip_breaks() is not None or block.carries() is not None or block.read_beside_the_stream() is not None:
            return False
    return model.support(layer).get("layer_input") is None


def enter(model: StandardModel, layer: int, stream: Tensor | None, count: int) -> None:
    """Inside a trace of ``count`` copies: skip the blocks before ``layer``, handing on ``stream`` (the unedited run's), where given."""
    if stream is not None:
        skip_layers(model, 0, layer - 1, with_=stream.repeat(count, *[1] * (stream.dim() - 1)))


def rows(batch: Batch, count: int) -> list[slice]:
    """Each copy's rows of ``batch`` repeated ``count`` times."""
    size = len(batch)
    return [slice(copy * size, (copy + 1) * size) for copy in range(count)]


def run_pack(
    model: StandardModel,
    batch: Batch,
    count: int,
    edit: Callable[[list[slice]], None],
    *,
    metric: Metric,
    remote: bool | str,
    forward: dict[str, Any],
    layer: int,
    entering: Tensor | None,
) -> list[float]:
    """One forward of ``batch`` once per cell, ``edit(rows)`` changing copy ``c``'s ``rows[c]`` at block ``layer``: each copy's metric.

    ``entering`` is the unedited run's stream entering ``layer`` (the blocks
    before it are skipped and hand it on), or None to run them.
    """
    copies = rows(batch, count)
    metrics: list = []
    with _arguments.left_padding(model), model.trace(repeated(batch, count), remote=remote, **forward):
        nnsight.save(metrics)
        enter(model, layer, entering, count)
        edit(copies)
        logits = model.logits
        for copy in copies:
            metrics.append(metric(logits[copy]))
    return [scalar(value) for value in metrics]


def measure_packs(
    values: Tensor,
    cells: list[tuple],
    packing: Packing,
    measure: Callable[[int, list], list[float]],
    *,
    desc: str,
    progress: bool,
) -> int:
    """Fill ``values`` pack by pack; the number of packs.

    ``cells`` are ``(row, layer, index, item)``: a pack holds one layer's
    cells, ``measure(layer, items)`` gives their values, written at
    ``values[(row, *index)]``.
    """
    packs = packing.packs(sorted(cells, key=lambda cell: cell[1]), key=lambda cell: cell[1])
    bar = tqdm(total=len(cells), desc=desc, disable=not progress)
    for pack in packs:
        for (row, _, index, _), value in zip(pack, measure(pack[0][1], [cell[3] for cell in pack])):
            values[(row, *index)] = value
        bar.update(len(pack))
    bar.close()
    return len(packs)
