"""Activation patching sweeps: write the clean run's value into the corrupted run, one site at a time.

Each sweep runs the clean prompt once, keeping the value it patches at every
layer it needs (one trace), runs the corrupted prompt once unpatched, then once
per patch with the clean value written in at that layer and position (or
head, or head and position), and records ``metric(logits)`` for every run.
The result is a ``Sweep``: a ``[layer, position]`` (``[layer, head]``,
``[layer, head, position]``) grid of metric values, with the clean and
corrupted baselines to normalize it by.

    sweep = patch_residual(model, "Mary and John. John gave it to", "Mary and John. Mary gave it to",
                           lambda logits: logits[:, -1, mary] - logits[:, -1, john])
    sweep.normalized().values   # 1 where the patch restores the clean metric, 0 where it does nothing

Only standard values are read and written (``layer_input``,
``self_attn.attention_output``, ``mlp.mlp_output``,
``self_attn.attention_head_outputs`` ...), so a sweep runs on every family the
kit passes; a value a family lacks raises its ``Unavailable``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from ..protocols import StandardModel
from . import _arguments
from ._arguments import Batch
from ._packs import Metric, measure_packs, planned, run_metric, run_pack, skippable
from .names import hook_of, standard_name
from .tokens import token_labels

#: the residual-stream values ``patch_residual`` can patch
STREAMS = ("layer_input", "layer_mid", "layer_output")


@dataclass(frozen=True)
class Sweep:
    """A patching sweep: the metric of the corrupted run with one site patched, per cell of a grid.

    ``values[i, j]`` is the metric when the clean value at ``labels[axes[0]][i]``
    (a layer) and ``labels[axes[1]][j]`` (a position or a head) is written into
    the corrupted run. ``axes`` names the axes, ``("layer", "position")``,
    ``("layer", "head")`` or, for ``patch_heads_by_position``, the three
    ``("layer", "head", "position")`` (``values[i, j, k]``; ``select(head=j)``
    is its two-axis slice); ``labels`` holds one tick label per index of each
    axis (layer indices, token strings, head indices), as strings. ``metric_clean``
    and ``metric_corrupted`` are the metric of the unpatched clean and
    corrupted runs; ``site`` names the value patched (``"layer_input"``,
    ``"self_attn.attention_head_outputs"`` ...). ``values`` is float32 on the CPU.

    The other sweeps return it too: ``patch_paths`` (senders on the second
    axis: ``"head"`` or ``"sublayer"``), and ``ablation_sweep``, whose
    ``metric_clean`` is the unablated run and ``metric_corrupted`` the run
    with every swept site ablated together, so ``normalized()`` is 1 where
    ablating the site alone changes nothing.
    """

    values: Tensor
    axes: tuple[str, ...]
    labels: dict[str, list[str]]
    metric_clean: float
    metric_corrupted: float
    site: str = field(default="")
    #: the patched forwards the sweep ran (each carrying a pack of cells), besides the clean and corrupted ones
    forwards: int = 0

    def normalized(self) -> Sweep:
        """The same sweep as the fraction of the way from corrupted to clean: ``(metric - corrupted) / (clean - corrupted)``.

        0 where the patch leaves the corrupted metric, 1 where it restores the
        clean one. The result's baselines are 1.0 and 0.0, so normalizing it
        again changes nothing. Raises ``ValueError`` when the clean and
        corrupted metrics are equal: there is no gap to measure against.
        """
        gap = self.metric_clean - self.metric_corrupted
        if gap == 0:
            raise ValueError(
                f"the clean and corrupted runs have the same metric ({self.metric_clean}), "
                "so a patch's effect cannot be normalized by their gap"
            )
        values = (self.values - self.metric_corrupted) / gap
        return replace(self, values=values, metric_clean=1.0, metric_corrupted=0.0)

    def select(self, **index: int) -> Sweep:
        """The sweep at one index of an axis, that axis dropped: ``sweep.select(head=1)`` of a ``[layer, head, position]`` sweep is ``[layer, position]``.

        The index counts along ``values``' axis (its label is
        ``labels[axis][index]``), negative from the end. One axis at a time.
        """
        if len(index) != 1:
            raise ValueError(
                f"select one axis at a time, by name, e.g. select({self.axes[-1]}=0); got {sorted(index) or 'none'}"
            )
        ((axis, at),) = index.items()
        if axis not in self.axes:
            raise ValueError(f"the sweep has no axis {axis!r}: its axes are {self.axes}")
        dim = self.axes.index(axis)
        size = self.values.shape[dim]
        if isinstance(at, bool) or not isinstance(at, int) or not -size <= at < size:
            raise ValueError(
                f"select({axis}={at!r}): the {axis} axis has {size} entries, {self.labels[axis]}; give an int index in range"
            )
        labels = {name: list(ticks) for name, ticks in self.labels.items() if name != axis}
        return replace(
            self, values=self.values.select(dim, at), axes=tuple(a for a in self.axes if a != axis), labels=labels
        )


# -- prompts -----------------------------------------------------------------------


def _check_prompts(model: StandardModel, clean: Any, corrupted: Any, function: str) -> tuple[Batch, Batch, list[str]]:
    """Both sides as left-padded batches checked to pair up token for token, and the position labels (the clean first prompt's tokens, padded)."""
    _arguments.outside_trace(function)
    clean = _arguments.prompts(model, clean, function=function, argument="clean")
    corrupted = _arguments.prompts(model, corrupted, function=function, argument="corrupted")
    if len(clean) != len(corrupted):
        raise _arguments.InvalidArgument(
            function,
            "corrupted",
            f"{len(corrupted)} prompts",
            f"clean has {len(clean)}: patching pairs them one to one",
            "give as many of each",
        )
    tokenizer = model.tokenizer
    for index, (a, b) in enumerate(zip(clean.lengths(), corrupted.lengths())):
        if a != b:
            labels = [token_labels(tokenizer, batch.input_ids[index, -n:]) for batch, n in ((clean, a), (corrupted, b))]
            raise _arguments.InvalidArgument(
                function,
                "corrupted",
                f"prompt {index}, {b} tokens",
                f"clean prompt {index} has {a} tokens: patching writes each position of the clean run into the same "
                f"position of the corrupted one, so each pair must tokenize to the same length (clean: {labels[0]}, corrupted: {labels[1]})",
                "make the two prompts the same number of tokens",
            )
    # the batch is left-padded, so position j of the run is j of the padded row
    return clean, corrupted, token_labels(tokenizer, clean.input_ids[0])


# -- the sweep ---------------------------------------------------------------------


def _owner(model: StandardModel, layer: int, where: str) -> Any:
    envoy = model.layers[layer]
    for part in filter(None, where.split(".")):
        envoy = getattr(envoy, part)
    return envoy


def _sweep(
    model: StandardModel,
    clean: Any,
    corrupted: Any,
    metric: Metric,
    *,
    function: str,
    site: str,
    layers: Iterable[int] | None,
    column_axis: str | tuple[str, ...],
    columns: Callable[[list[str], int], Any],
    column_labels: Callable[[list[str], Any], Any],
    write: Callable[..., None],
    progress: bool,
    remote: bool | str,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """The shared sweep: cache the clean value at each layer, then the corrupted run with each (layer, column) patched.

    ``columns(tokens, layer)`` lists the columns to patch at a layer (positions
    or heads), ``write(patched, clean, column)`` copies the clean value's
    column into ``patched`` (one cell's rows) in place. With several column
    axes (``column_axis`` a tuple, e.g. ``("head", "position")``),
    ``columns`` gives one list per axis, ``column_labels`` one list of labels
    per axis, the cells are their product and ``write`` takes one index per
    axis. The cells are packed
    along the batch axis (``_packs.run_pack``): a forward runs the
    corrupted prompts once per cell of a pack, each copy patched at its own
    column, and ``metric`` reads each copy's logits alone, so each cell's value
    is what one trace of that cell alone gives. A pack holds one layer's cells
    and skips the blocks before that layer where it may (``_packs.skippable``),
    handing on the stream the corrupted run had there.
    """
    where, _, name = site.rpartition(".")
    clean, corrupted, tokens = _check_prompts(model, clean, corrupted, function)
    chosen = _arguments.layers(model, layers, function=function)
    several = isinstance(column_axis, tuple)
    axes = column_axis if isinstance(column_axis, tuple) else (column_axis,)
    per_layer = {layer: columns(tokens, layer) if several else [columns(tokens, layer)] for layer in chosen}
    # the columns are the same on every layer, but for blocks that differ in head
    # count: then the labels are the widest layer's, and the others' extra cells NaN
    widest: list[Any] = [
        max((cols[axis] for cols in per_layer.values()), key=len, default=[]) for axis in range(len(axes))
    ]
    widths = [len(cols) for cols in widest]
    forward, at, packing = planned(
        model,
        len(corrupted),
        len(tokens),
        logits_at=logits_at,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        function=function,
    )

    with torch.no_grad():
        order = sorted(set(chosen))  # forward order: a trace reads layer after layer
        skips = [layer for layer in order if skippable(model, layer)]

        def read_clean() -> list:
            return [getattr(_owner(model, layer, where), name).clone() for layer in order]

        def read_streams() -> list:
            return [model.layers[layer].layer_input.clone() for layer in skips]

        # the two runs compute every position's logits, which the metric reads at logits_at: a one-row product
        # would round otherwise than the packs' many-row one
        metric_clean, cached = run_metric(model, clean.inputs, metric, remote, read_clean, at)
        metric_corrupted, streams = run_metric(model, corrupted.inputs, metric, remote, read_streams, at)
        cache, entering = dict(zip(order, cached)), dict(zip(skips, streams))

        values = torch.full((len(chosen), *widths), float("nan"), dtype=torch.float32)
        cells = [
            (row, layer, cell, tuple(per_layer[layer][axis][index] for axis, index in enumerate(cell)))
            for row, layer in enumerate(chosen)
            for cell in itertools.product(*(range(len(cols)) for cols in per_layer[layer]))
        ]

        def measure(layer: int, patches: list[tuple[int, ...]]) -> list[float]:
            def edit(rows: list[slice]) -> None:
                owner = _owner(model, layer, where)
                patched = getattr(owner, name).clone()
                for copy, column in zip(rows, patches):
                    write(patched[copy], cache[layer].to(device=patched.device, dtype=patched.dtype), *column)
                setattr(owner, name, patched)

            return run_pack(
                model,
                corrupted,
                len(patches),
                edit,
                metric=metric,
                remote=remote,
                forward=forward,
                layer=layer,
                entering=entering.get(layer),
            )

        forwards = measure_packs(values, cells, packing, measure, desc=f"patching {site}", progress=progress)

    shown = column_labels(tokens, widest) if several else [column_labels(tokens, widest[0])]
    labels = {"layer": [str(layer) for layer in chosen], **dict(zip(axes, shown))}
    return Sweep(values, ("layer", *axes), labels, metric_clean, metric_corrupted, site, forwards=forwards)


def _heads(model: StandardModel, heads: Iterable[int] | None, layer: int, function: str) -> list[int]:
    """``heads`` checked against block ``layer``'s attention heads (all where None)."""
    return _arguments.indices(
        heads, model.layers[layer].self_attn.num_heads, function=function, argument="heads", what="attention heads"
    )


def _position_sweep(
    model, function, clean, corrupted, metric, site, layers, positions, progress, remote, **packing: Any
) -> Sweep:
    def columns(tokens: list[str], layer: int) -> list[int]:
        return _arguments.positions(positions, len(tokens), function=function)

    def write(patched: Tensor, source: Tensor, position: int) -> None:
        patched[:, position] = source[:, position]

    return _sweep(
        model, clean, corrupted, metric, function=function, site=site, layers=layers, column_axis="position",
        columns=columns, column_labels=lambda tokens, cols: [tokens[p] for p in cols],
        write=write, progress=progress, remote=remote, **packing,
    )  # fmt: skip


def patch_residual(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    *,
    layers: Iterable[int] | None = None,
    positions: Iterable[int] | None = None,
    stream: str = "layer_input",
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Patch the residual stream entering each block, one (layer, position) per cell: a ``[layer, position]`` Sweep.

    For each layer and position, the corrupted prompt runs with that
    position of the clean run's ``layers[layer].layer_input`` written in (the
    whole stream there: every earlier block's work on that token), and
    ``metric(logits)`` is recorded. ``layer_input`` is the default because it
    starts at the embeddings: layer 0 patches the tokens themselves, so the
    positions where the prompts differ restore the clean run exactly there.
    ``stream="layer_output"`` patches the stream leaving each block instead
    (at the last layer only the metric's own positions matter), and
    ``"layer_mid"`` the stream between attention and MLP (a parallel block
    has none: ``Unavailable``). TransformerLens's names for them
    (``"hook_resid_pre"``, ``"hook_resid_mid"``, ``"hook_resid_post"``) work
    too; the sweep's ``site`` is the standard name.

    ``clean`` and ``corrupted`` are a prompt or equal-length lists of
    prompts, strings or token ids; each pair must tokenize to the same number
    of tokens (checked, with every other argument, before the model runs:
    ``nnterp.InvalidArgument``). ``metric`` maps the logits ``[batch, seq,
    vocab_size]`` to a float or a one-element tensor; it runs inside the
    trace. ``layers`` and ``positions`` pick the rows and columns (all by
    default; negative indices count from the end, out of range is refused;
    positions index the batch left-padded whatever side the tokenizer pads, so
    ``-1`` is every prompt's last token). ``labels["position"]`` are the first
    clean prompt's tokens.

    Runs the clean and the corrupted prompts once each, then the cells packed
    along the batch axis (``nnterp.toolkit.packing``): one forward per layer,
    or per ``cells_per_forward`` cells, as many as ``memory_budget`` (bytes;
    by default half the GPU's free memory, 2 GiB on a CPU) holds by the
    estimate, which is refused when it cannot hold one cell. ``logits_at``
    (the positions the metric reads, e.g. ``[-1]``) has the model compute the
    logits there alone (transformers' ``logits_to_keep``): the metric then
    receives ``[batch, len(logits_at), vocab_size]``, and a sweep whose metric
    reads the last token skips most of the unembedding.
    """
    if hook_of(stream) is not None:
        stream = standard_name(model, stream)
    if stream not in STREAMS:
        raise _arguments.InvalidArgument(
            "patch_residual",
            "stream",
            stream,
            f"expected one of {', '.join(STREAMS)} (or hook_resid_pre, hook_resid_mid, hook_resid_post)",
        )
    return _position_sweep(
        model,
        "patch_residual",
        clean,
        corrupted,
        metric,
        stream,
        layers,
        positions,
        progress,
        remote,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        logits_at=logits_at,
    )


def patch_attention_output(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    *,
    layers: Iterable[int] | None = None,
    positions: Iterable[int] | None = None,
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Patch each block's attention contribution, one (layer, position) at a time: a ``[layer, position]`` Sweep.

    Writes the clean run's ``self_attn.attention_output`` (what the block adds
    to the stream for its attention, after any post-norm) at that layer and
    position into the corrupted run. Arguments and result as ``patch_residual``.
    """
    return _position_sweep(
        model,
        "patch_attention_output",
        clean,
        corrupted,
        metric,
        "self_attn.attention_output",
        layers,
        positions,
        progress,
        remote,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        logits_at=logits_at,
    )


def patch_mlp_output(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    *,
    layers: Iterable[int] | None = None,
    positions: Iterable[int] | None = None,
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Patch each block's MLP contribution, one (layer, position) at a time: a ``[layer, position]`` Sweep.

    Writes the clean run's ``mlp.mlp_output`` (what the block adds to the
    stream for its MLP, after any post-norm) at that layer and position into
    the corrupted run. Arguments and result as ``patch_residual``.
    """
    return _position_sweep(
        model,
        "patch_mlp_output",
        clean,
        corrupted,
        metric,
        "mlp.mlp_output",
        layers,
        positions,
        progress,
        remote,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        logits_at=logits_at,
    )


def patch_heads(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    *,
    layers: Iterable[int] | None = None,
    heads: Iterable[int] | None = None,
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Patch each attention head's output at every position, one (layer, head) at a time: a ``[layer, head]`` Sweep.

    Writes head ``h`` of the clean run's ``self_attn.attention_head_outputs``
    (``[batch, seq, num_heads, head_dim]``, before the output projection) at
    every position into the corrupted run. Needs the attention interior, so
    the model must run eager attention (else ``Unavailable``). ``heads`` picks
    the columns (all by default); where blocks differ in head count, a
    block's missing heads are NaN. Otherwise as ``patch_residual``.
    """

    def columns(tokens: list[str], layer: int) -> list[int]:
        return _heads(model, heads, layer, "patch_heads")

    def write(patched: Tensor, source: Tensor, head: int) -> None:
        patched[:, :, head] = source[:, :, head]

    return _sweep(
        model, clean, corrupted, metric, function="patch_heads", site="self_attn.attention_head_outputs", layers=layers,
        column_axis="head", columns=columns, column_labels=lambda tokens, cols: [str(h) for h in cols],
        write=write, progress=progress, remote=remote, cells_per_forward=cells_per_forward, memory_budget=memory_budget, logits_at=logits_at,
    )  # fmt: skip


def patch_heads_by_position(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    *,
    layers: Iterable[int] | None = None,
    heads: Iterable[int] | None = None,
    positions: Iterable[int] | None = None,
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Patch each attention head's output at one position at a time: a ``[layer, head, position]`` Sweep.

    TransformerLens's head-output-by-position patching: head ``h`` of the
    clean run's ``self_attn.attention_head_outputs`` at position ``p`` alone
    written into the corrupted run, for every (layer, head, position) cell.
    ``patch_heads`` is the same with every position of the head at once.
    ``sweep.select(head=h)`` is one head's ``[layer, position]`` grid (what
    ``plot_sweep`` draws). Needs eager attention; otherwise as ``patch_heads``
    and, for ``positions``, ``patch_residual``.
    """
    function = "patch_heads_by_position"

    def columns(tokens: list[str], layer: int) -> list[list[int]]:
        return [_heads(model, heads, layer, function), _arguments.positions(positions, len(tokens), function=function)]

    def labels(tokens: list[str], cols: list[list[int]]) -> list[list[str]]:
        return [[str(h) for h in cols[0]], [tokens[p] for p in cols[1]]]

    def write(patched: Tensor, source: Tensor, head: int, position: int) -> None:
        patched[:, position, head] = source[:, position, head]

    return _sweep(
        model, clean, corrupted, metric, function=function, site="self_attn.attention_head_outputs", layers=layers,
        column_axis=("head", "position"), columns=columns, column_labels=labels,
        write=write, progress=progress, remote=remote, cells_per_forward=cells_per_forward, memory_budget=memory_budget, logits_at=logits_at,
    )  # fmt: skip
