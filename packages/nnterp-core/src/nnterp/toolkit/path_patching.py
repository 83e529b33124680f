"""Path patching: a sender's effect on the metric through chosen receivers only (Wang et al. 2022, TransformerLens).

For each sender (a head, or a block's attention or MLP contribution) and the
receivers (inputs of later components: a head's query, key or value, a block's
attention or MLP input, the stream entering a block, the final stream the
unembedding reads), three runs:

1. the clean and corrupted prompts, keeping the sender's clean value and every
   block's corrupted contributions;
2. the corrupted prompt with the sender's clean value written in and every
   other contribution from the sender's block on frozen at its corrupted value
   (``freeze="all"``: attention and MLP; ``"attention"``: the attention only,
   Wang et al.'s convention, where a path through an MLP counts as direct),
   recording the receivers' inputs: the sender's change reaches them only
   through the residual stream;
3. the corrupted prompt with only the receivers' inputs replaced by those
   recorded in 2, and ``metric(logits)`` of it.

    sweep = patch_paths(model, clean, corrupted, metric, receivers=[(1, "k", 0)])
    sweep.normalized().values   # [layer, head] of senders: 1 where the path restores the clean metric

Only standard values are read and written (``attention_head_outputs``,
``attention_output``, ``mlp_output``, ``attention_queries`` / ``keys`` /
``values``, ``attention_norm_output``, ``mlp_input``, ``layer_input``,
``layer_output``), so it runs on every family that serves them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import nnsight

import torch
from torch import Tensor

from ..protocols import StandardModel
from . import _arguments
from ._arguments import Batch
from ._packs import Metric, enter, measure_packs, planned, repeated, rows, run_metric, run_pack, skippable
from .patching import Sweep, _check_prompts, _heads

__all__ = ["patch_paths"]

#: the receivers' inputs: (the component under the block, the standard value, its place in the block's forward)
INPUTS = {
    "stream": ("", "layer_input", 0),
    "attention": ("", "attention_norm_output", 1),
    "q": ("self_attn", "attention_queries", 2),
    "k": ("self_attn", "attention_keys", 3),
    "v": ("self_attn", "attention_values", 4),
    "mlp": ("", "mlp_input", 7),
    "logits": ("", "layer_output", 9),
}
#: where the sender's and the frozen contributions are written, in the same order
HEADS, ATTENTION, MLP = 5, 6, 8
SUBLAYERS = ("attention_output", "mlp_output")
FREEZE = {"all": ("attention_output", "mlp_output"), "attention": ("attention_output",)}
SPELLING = (
    '(layer, "q" | "k" | "v") or (layer, "q" | "k" | "v", head or [heads]) for heads\' queries, keys, values; '
    '(layer, "attention"), (layer, "mlp") for a block\'s attention or MLP input; (layer, "stream") for the stream '
    'entering a block; "logits" for the final stream the unembedding reads'
)


@dataclass(frozen=True)
class _Receiver:
    """One receiver: ``input`` (a key of INPUTS) of block ``layer``, at ``heads`` where it has a head axis (None: all)."""

    layer: int
    input: str
    heads: tuple[int, ...] | None = None

    @property
    def order(self) -> tuple[int, int]:
        return self.layer, INPUTS[self.input][2]

    def host(self, model: StandardModel) -> Any:
        envoy = model.layers[self.layer]
        where = INPUTS[self.input][0]
        return getattr(envoy, where) if where else envoy

    def read(self, model: StandardModel) -> Tensor:
        return getattr(self.host(model), INPUTS[self.input][1])

    def write(self, model: StandardModel, recorded: Tensor, positions: list[int] | None) -> None:
        """The input replaced by ``recorded`` at this receiver's heads and ``positions`` (all where None)."""
        host, name = self.host(model), INPUTS[self.input][1]
        if self.heads is None and positions is None:
            setattr(host, name, recorded)
            return
        value = getattr(host, name).clone()
        recorded = recorded.to(device=value.device, dtype=value.dtype)
        at = slice(None) if positions is None else torch.tensor(positions, device=value.device)
        if self.heads is None:  # [batch, seq, hidden]
            value[:, at] = recorded[:, at]
        else:  # [batch, heads, seq, width]
            for head in self.heads:
                value[:, head, at] = recorded[:, head, at]
        setattr(host, name, value)

    def __str__(self) -> str:
        if self.input == "logits":
            return "logits"
        name = INPUTS[self.input][1]
        heads = "" if self.heads is None else f"[{', '.join(map(str, self.heads))}]"
        return f"layers.{self.layer}.{INPUTS[self.input][0] + '.' if INPUTS[self.input][0] else ''}{name}{heads}"


def _receivers(model: StandardModel, given: Any, function: str) -> list[_Receiver]:
    """``given`` as receivers in forward order, each checked against the model (blocks, heads, a parallel block's shared input)."""
    one = isinstance(given, str) or (
        isinstance(given, tuple) and bool(given) and not isinstance(given[0], (tuple, str))
    )
    items = [given] if one else given
    if not isinstance(items, (list, tuple)) or not items:
        raise _arguments.InvalidArgument(function, "receivers", given, f"expected a list of receivers: {SPELLING}")
    out: list[_Receiver] = []
    for item in items:
        if item == "logits":
            out.append(_Receiver(model.num_layers - 1, "logits"))
            continue
        if not isinstance(item, tuple) or len(item) not in (2, 3) or item[1] not in INPUTS or item[1] == "logits":
            raise _arguments.InvalidArgument(function, "receivers", given, f"item {item!r}: expected {SPELLING}")
        layer = _arguments.layer(model, item[0], function=function, argument="receivers")
        kind = item[1]
        if kind in ("q", "k", "v"):
            attention = model.layers[layer].self_attn
            count, what = (
                (attention.num_heads, "query heads") if kind == "q" else (attention.num_kv_heads, "key/value heads")
            )
            if kind != "q" and count != attention.num_heads:
                what += f" (grouped-query attention: each serves {attention.num_heads // count} query heads)"
            chosen = item[2] if len(item) == 3 else None
            try:
                heads = tuple(
                    _arguments.indices(
                        chosen, count, function=function, argument="receivers", what=f"{what} of block {layer}"
                    )
                )
            except _arguments.InvalidArgument as error:
                raise _arguments.InvalidArgument(
                    function, "receivers", given, f"item {item!r}: " + str(error).split("): ", 1)[1]
                ) from None
            out.append(_Receiver(layer, kind, heads))
            continue
        if len(item) == 3:
            raise _arguments.InvalidArgument(
                function,
                "receivers",
                given,
                f"item {item!r}: a {kind!r} receiver has no heads",
                f'give ({item[0]}, "{kind}")',
            )
        if kind == "attention" and model.support(layer).get("layer_mid") is not None:
            raise _arguments.InvalidArgument(
                function, "receivers", given,
                f"item {item!r}: block {layer} is a parallel block, whose attention and MLP read the same norm output, so the attention's input alone is no value",
                f'name its heads\' inputs instead: ({layer}, "q"), ({layer}, "k"), ({layer}, "v")',
            )  # fmt: skip
        out.append(_Receiver(layer, kind))
    return sorted(dict.fromkeys(out), key=lambda receiver: receiver.order)


def _keep_last(model: StandardModel) -> dict[str, Any]:
    """The forward's keyword that computes the last position's logits alone, where it takes one (the recording run reads none)."""
    forward: Any = getattr(model._module, "forward", None)  # an nn.Module's: never None
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(forward).parameters else {}


def patch_paths(
    model: StandardModel,
    clean: str | Sequence[str],
    corrupted: str | Sequence[str],
    metric: Metric,
    receivers: Any,
    *,
    senders: str = "heads",
    layers: Iterable[int] | None = None,
    heads: Iterable[int] | None = None,
    positions: Iterable[int] | None = None,
    freeze: str = "all",
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Patch each sender's path to ``receivers`` alone: a ``[layer, head]`` Sweep of senders (``[layer, sublayer]`` for sublayers).

    ``values[i, j]`` is the metric of the corrupted run whose receivers' inputs
    are what they would be if sender (layer i, head j) were clean and every
    other contribution from its block on were frozen at the corrupted run
    (the module docstring gives the three runs). ``receivers`` is a list of:

    - ``(layer, "q")``, ``(layer, "k")``, ``(layer, "v")``, optionally with a
      head or list of heads: ``(layer, "k", 0)`` (heads' inputs, read as
      ``self_attn.attention_queries`` / ``attention_keys`` /
      ``attention_values``; eager attention only). Keys and values are counted
      in key/value heads: under grouped-query attention one serves several
      query heads;
    - ``(layer, "attention")``, ``(layer, "mlp")``: a block's attention input
      (``attention_norm_output``; not on a parallel block, where the MLP reads
      it too) or MLP input (``mlp_input``);
    - ``(layer, "stream")``: the stream entering a block (``layer_input``),
      which every later component reads;
    - ``"logits"``: the final stream the unembedding reads.

    ``senders="heads"`` sweeps heads (``attention_head_outputs``, every
    position; ``heads`` picks them, eager attention only); ``"sublayers"``
    sweeps each block's ``attention_output`` and ``mlp_output``. ``layers``
    picks the senders' blocks. ``positions`` picks where the receivers' inputs
    are replaced (all by default). ``freeze="all"`` freezes every attention and
    MLP contribution between sender and receivers (direct paths through the
    stream alone); ``"attention"`` the attention ones only, MLPs recomputing
    (the IOI paper's convention). A receiver before its sender receives
    nothing: its cell is the corrupted metric. With ``freeze="attention"``,
    ``(layer + 1, "stream")`` makes a head's cell its ``patch_heads`` cell.

    Prompts, ``metric``, packing (``cells_per_forward``, ``memory_budget``)
    and ``logits_at`` as ``patch_residual``; each pack of senders runs two
    forwards. Everything is checked before the model runs.
    """
    function = "patch_paths"
    clean_batch, corrupted_batch, tokens = _check_prompts(model, clean, corrupted, function)
    chosen_receivers = _receivers(model, receivers, function)
    if senders not in ("heads", "sublayers"):
        raise _arguments.InvalidArgument(
            function,
            "senders",
            senders,
            'expected "heads" (attention_head_outputs) or "sublayers" (attention_output and mlp_output)',
        )
    if freeze not in FREEZE:
        raise _arguments.InvalidArgument(
            function,
            "freeze",
            freeze,
            'expected "all" (attention and MLP contributions) or "attention" (MLPs recompute)',
        )
    if senders == "sublayers" and heads is not None:
        raise _arguments.InvalidArgument(
            function,
            "heads",
            heads,
            'heads pick sender heads, and senders="sublayers" sends whole sublayers',
            'leave heads=None, or pass senders="heads"',
        )
    chosen = _arguments.layers(model, layers, function=function)
    if senders == "heads":
        per_layer = {layer: _heads(model, heads, layer, function) for layer in chosen}
    else:
        per_layer = {layer: [0, 1] for layer in chosen}
    widest = max(per_layer.values(), key=len)
    written = None if positions is None else _arguments.positions(positions, len(tokens), function=function)
    forward, at, packing = planned(
        model,
        len(corrupted_batch),
        len(tokens),
        logits_at=logits_at,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        function=function,
    )
    frozen = FREEZE[freeze]
    first = min(chosen)

    with torch.no_grad():
        order = sorted(set(chosen))
        skips = [layer for layer in order if skippable(model, layer)]
        site = "self_attn.attention_head_outputs" if senders == "heads" else None

        def read_clean() -> list:
            if senders == "heads":
                return [model.layers[layer].self_attn.attention_head_outputs.clone() for layer in order]
            return [
                value
                for layer in order
                for value in (
                    model.layers[layer].self_attn.attention_output.clone(),
                    model.layers[layer].mlp.mlp_output.clone(),
                )
            ]

        def read_corrupted() -> list:
            out = []
            for layer in range(model.num_layers):
                if layer in skips:
                    out.append(model.layers[layer].layer_input.clone())
                if layer >= first:
                    out.append(model.layers[layer].self_attn.attention_output.clone())
                    out.append(model.layers[layer].mlp.mlp_output.clone())
            return out

        metric_clean, cached = run_metric(model, clean_batch.inputs, metric, remote, read_clean, at)
        metric_corrupted, saved = run_metric(model, corrupted_batch.inputs, metric, remote, read_corrupted, at)
        if senders == "heads":
            sources = {(layer, 0): value for layer, value in zip(order, cached)}
        else:
            sources = {(layer, part): cached[2 * row + part] for row, layer in enumerate(order) for part in (0, 1)}
        entering, contributions, it = {}, {}, iter(saved)
        for layer in range(model.num_layers):
            if layer in skips:
                entering[layer] = next(it)
            if layer >= first:
                contributions[layer, "attention_output"] = next(it)
                contributions[layer, "mlp_output"] = next(it)

        values = torch.full((len(chosen), len(widest)), float("nan"), dtype=torch.float32)
        cells = [
            (row, layer, (col,), sender)
            for row, layer in enumerate(chosen)
            for col, sender in enumerate(per_layer[layer])
        ]

        def measure(layer: int, sending: list[int]) -> list[float]:
            run = _Pack(
                model,
                corrupted_batch,
                layer,
                sending,
                senders,
                frozen,
                sources,
                contributions,
                entering.get(layer),
                remote,
            )
            recorded = run.record([receiver for receiver in chosen_receivers if receiver.layer >= layer])
            return run.measure(recorded, written, metric, forward)

        forwards = measure_packs(values, cells, packing, measure, desc="path patching", progress=progress)

    sent = site or "attention_output, mlp_output"
    site = f"{sent} -> {', '.join(map(str, chosen_receivers))}"
    column = "head" if senders == "heads" else "sublayer"
    labels = {
        "layer": [str(layer) for layer in chosen],
        column: [str(h) for h in widest] if senders == "heads" else list(SUBLAYERS),
    }
    return Sweep(values, ("layer", column), labels, metric_clean, metric_corrupted, site, forwards=2 * forwards)


@dataclass
class _Pack:
    """One pack of senders of block ``layer``: the corrupted prompts once per sender, run twice (record, then measure)."""

    model: StandardModel
    corrupted: Batch
    layer: int
    senders: list[int]
    kind: str
    frozen: tuple[str, ...]
    sources: dict
    contributions: dict
    entering: Tensor | None
    remote: bool | str

    def _contribution(self, block: int, name: str) -> None:
        """Block ``block``'s ``name`` contribution: the sender's clean value in its copy, frozen at the corrupted run's elsewhere."""
        model, count = self.model, len(self.senders)
        host = model.layers[block].self_attn if name == "attention_output" else model.layers[block].mlp
        part = SUBLAYERS.index(name)
        sending = [
            copy
            for copy, sender in enumerate(self.senders)
            if block == self.layer and self.kind == "sublayers" and sender == part
        ]
        freezing = name in self.frozen and (
            block > self.layer or (block == self.layer and (part == 1 or self.kind == "sublayers"))
        )
        if not sending and not freezing:
            return
        corrupted = self.contributions[block, name]
        value = corrupted.repeat(count, *[1] * (corrupted.dim() - 1)) if freezing else getattr(host, name).clone()
        copies = rows(self.corrupted, count)
        for copy in sending:
            value[copies[copy]] = self.sources[block, part]
        setattr(host, name, value.to(dtype=corrupted.dtype))

    def record(self, receivers: list) -> list[tuple[_Receiver, Tensor]]:
        """Run 2: the sender clean in its copy, every other contribution from its block on frozen; each receiver with its input."""
        model, count = self.model, len(self.senders)
        out: list[tuple[_Receiver, Tensor]] = []
        pending = list(receivers)
        copies = rows(self.corrupted, count)
        with (
            _arguments.left_padding(model),
            model.trace(repeated(self.corrupted, count), remote=self.remote, **_keep_last(model)),
        ):
            nnsight.save(out)
            enter(model, self.layer, self.entering, count)
            for block in range(self.layer, model.num_layers):
                for rank in range(10):
                    while pending and pending[0].order == (block, rank):
                        receiver = pending.pop(0)
                        out.append((receiver, receiver.read(model).clone()))
                    if block == self.layer and rank == HEADS and self.kind == "heads":
                        attention = model.layers[block].self_attn
                        patched = attention.attention_head_outputs.clone()
                        source = self.sources[block, 0]
                        for copy, head in enumerate(self.senders):
                            patched[copies[copy], :, head] = source[:, :, head].to(
                                device=patched.device, dtype=patched.dtype
                            )
                        attention.attention_head_outputs = patched
                    elif rank == ATTENTION:
                        self._contribution(block, "attention_output")
                    elif rank == MLP:
                        self._contribution(block, "mlp_output")
        return out

    def measure(
        self, recorded: list, positions: list[int] | None, metric: Metric, forward: dict[str, Any]
    ) -> list[float]:
        """Run 3: the corrupted prompts with the receivers' inputs replaced by ``recorded``; each copy's metric."""

        def edit(_: list[slice]) -> None:
            for receiver, value in recorded:
                receiver.write(self.model, value, positions)

        return run_pack(
            self.model,
            self.corrupted,
            len(self.senders),
            edit,
            metric=metric,
            remote=self.remote,
            forward=forward,
            layer=self.layer,
            entering=self.entering,
        )
