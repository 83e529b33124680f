"""Ablation: remove what a head, a neuron, a sublayer or an expert adds, inside a trace or one site at a time in a sweep.

An ``Ablation`` names the sites and how each is removed; it is built outside a
trace (where it reads the reference batch once, and checks every site against
the model) and applied inside one::

    ablation = Ablation(model, heads=[(1, 3)], how="mean", reference=["The cat sat", "A dog ran"])
    with model.trace("The Eiffel Tower is in"):
        ablation.apply()
        logits = model.logits.save()

``ablation_sweep`` ablates each head, neuron group, sublayer or expert of
each layer one at a time and records ``metric(logits)``: a ``Sweep`` as the
patching sweeps give (``nnterp.toolkit.patching``), its cells packed along
the batch axis in the same way (``nnterp.toolkit.packing``).

The sites are standard values: a head is ``self_attn.attention_head_outputs[:,
:, h]`` (before the output projection), a neuron ``mlp.mlp_neurons[..., n]``
(before the down projection; a mixture of experts has no one neuron tensor),
a sublayer its contribution, ``self_attn.attention_output`` or
``mlp.mlp_output`` (after any post-norm: on a sandwich block, zeroing it makes
the block add nothing for that sublayer), an expert its share of
``mlp.routed_output``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..errors import Unavailable
from ..protocols import StandardModel
from . import _arguments
from ._packs import Metric, measure_packs, planned, run_metric, run_pack, skippable
from .cache import cache_values
from .patching import Sweep

__all__ = ["HOWS", "OVER", "Ablation", "ablation_sweep"]

#: how a site's value is replaced
HOWS = ("zero", "mean", "position_mean", "resample")
#: what ``ablation_sweep`` ablates one at a time
OVER = ("heads", "neurons", "sublayers", "experts")

#: each kind of site: the value it edits (block-relative), in the order a block computes them
VALUES = {
    "head": "self_attn.attention_head_outputs",
    "attention": "self_attn.attention_output",
    "expert": "mlp.routed_output",
    "neuron": "mlp.mlp_neurons",
    "mlp": "mlp.mlp_output",
}
ORDER = tuple(VALUES)


@dataclass(frozen=True)
class Site:
    """One ablated site: block ``layer``'s ``kind`` (a key of ``VALUES``), at ``columns`` (heads, neurons, experts; () for a sublayer)."""

    layer: int
    kind: str
    columns: tuple[int, ...] = ()


def _pairs(given: Any, *, function: str, argument: str) -> list[tuple[Any, Any]]:
    """``(layer, indices)`` pairs: a list of them, or a dict ``{layer: indices}``."""
    if given is None:
        return []
    if isinstance(given, dict):
        return list(given.items())
    form = f"expected (layer, index) pairs, e.g. {argument}=[(1, 3), (2, [0, 5])], or a dict {{layer: indices}}"
    try:
        items = list(given)
    except TypeError:
        raise _arguments.InvalidArgument(function, argument, given, form) from None
    if not items or not all(isinstance(item, (tuple, list)) and len(item) == 2 for item in items):
        raise _arguments.InvalidArgument(function, argument, given, form)
    return [tuple(item) for item in items]


def _available(model: StandardModel, layer: int, name: str) -> str | None:
    """Why block ``layer`` has no standard value ``name`` (block-relative), or None."""
    support = model.support(layer)
    if name in support:
        return support[name]
    owner = name.rpartition(".")[0]
    host = getattr(model.layers[layer], owner, None) if owner else model.layers[layer]
    return getattr(host, "lacks", None) or f"block {layer} has no {name}"


def _require(model: StandardModel, layer: int, name: str) -> None:
    reason = _available(model, layer, name)
    if reason is not None:
        owner, _, value = name.rpartition(".")
        raise Unavailable(getattr(model.layers[layer], owner) if owner else model.layers[layer], value, reason)


def _width(model: StandardModel, layer: int, kind: str) -> int:
    """How many columns block ``layer`` has for ``kind``: its heads, neurons or experts."""
    block = model.layers[layer]
    if kind == "head":
        return block.self_attn.num_heads
    if kind == "neuron":
        return block.mlp.intermediate_size
    return block.mlp.num_experts


def _needs(kind: str, how: str) -> tuple[str, ...]:
    """The block-relative values an ablation of ``kind`` by ``how`` reads and writes."""
    if kind == "expert":
        return ("mlp.expert_weights", "mlp.expert_indices") + (
            () if how == "zero" else ("mlp.expert_outputs", "mlp.routed_output")
        )
    return (VALUES[kind],)


def _checked_sites(
    model: StandardModel, function: str, heads: Any, neurons: Any, attention: Any, mlp: Any, experts: Any, how: str
) -> list[Site]:
    """Every site named, checked against the model: layers and indices in range, the values available."""
    sites: list[Site] = []
    for kind, argument, given in (
        ("head", "heads", heads),
        ("neuron", "neurons", neurons),
        ("expert", "experts", experts),
    ):
        for layer, columns in _pairs(given, function=function, argument=argument):
            index = _arguments.layer(model, layer, function=function, argument=argument)
            for name in _needs(kind, how):
                _require(model, index, name)
            what = {"head": "attention heads", "neuron": "neurons", "expert": "experts"}[kind]
            chosen = _arguments.indices(
                columns,
                _width(model, index, kind),
                function=function,
                argument=argument,
                what=f"{what} of block {index}",
                default_all=False,
            )
            sites.append(Site(index, kind, tuple(chosen)))
    for kind, argument, given in (("attention", "attention", attention), ("mlp", "mlp", mlp)):
        if given is None:
            continue
        for index in _arguments.layers(model, given, function=function, argument=argument, default_all=False):
            _require(model, index, VALUES[kind])
            sites.append(Site(index, kind))
    return sites


def _mean(values: Tensor, mask: Tensor) -> Tensor:
    """The mean of ``values`` (``[prompts, seq, ...]``) over the real tokens of ``mask`` (``[prompts, seq]``)."""
    weights = mask.to(values.dtype).reshape(*mask.shape, *[1] * (values.dim() - 2))
    return (values * weights).sum((0, 1)) / weights.sum()


def _expert_share(outputs: Tensor, indices: Tensor, expert: int) -> Tensor:
    """Expert ``expert``'s share of ``routed_output``: the weighted outputs of the slots that run it, ``[..., hidden]``."""
    return (outputs * (indices == expert).unsqueeze(-1).to(outputs.dtype)).sum(-2)


class Ablation:
    """Heads, neurons, sublayers or experts to remove from a run, and what each is replaced by; ``apply()`` inside a trace.

    Sites, by block (negative blocks count from the end): ``heads=[(layer,
    head), ...]`` (a head index, a list or a slice; or ``{layer: heads}``),
    ``neurons=[(layer, neuron), ...]`` likewise, ``attention=[layers]`` and
    ``mlp=[layers]`` for the sublayers' contributions, ``experts=[(layer,
    expert), ...]`` on a mixture of experts. ``how``:

    - ``"zero"``: the value set to zero (no ``reference``);
    - ``"mean"``: set to its mean over every real token of every prompt of
      ``reference`` (padding excluded), one vector at every position;
    - ``"position_mean"``: set, position by position, to its mean over the
      ``reference`` prompts, which must all have the same number of tokens,
      and the ablated run too (TransformerLens's mean ablation on
      equal-length prompts);
    - ``"resample"``: set to the value the run of ``reference`` had at the
      same position; ``reference`` is one prompt (used for every prompt of the
      run) or as many as the run has, each with the run's number of tokens
      (left-padded: position ``-1`` is every prompt's last token).

    An expert is ablated by removing its share of ``mlp.routed_output`` (its
    weighted output, summed over the slots that run it). ``"zero"`` does it by
    zeroing its routing weight (``mlp.expert_weights`` where
    ``mlp.expert_indices`` is the expert), so no family needs its per-slot
    outputs; with ``renormalize=True`` each token's remaining slots are then
    scaled so its weights keep the total they had (on Mixtral, sum to one
    again), otherwise the other slots keep their weights. ``"mean"`` and
    ``"resample"`` replace the expert's share by its mean share over the
    reference tokens (zero on the tokens it did not run on counted in) or by
    its share in the reference run: they read ``mlp.expert_outputs``
    (grouped_mm / batched_mm experts).

    Everything is checked here, before anything runs: the blocks and indices
    in range, every value available on the model (else its ``Unavailable``),
    ``how`` and ``reference``. The reference runs once, here
    (``cache_values``); its means or values are kept float32 on the CPU, and
    cast to the run's device and dtype when written.
    """

    def __init__(
        self,
        model: StandardModel,
        *,
        heads: Any = None,
        neurons: Any = None,
        attention: Any = None,
        mlp: Any = None,
        experts: Any = None,
        how: str = "zero",
        reference: Any = None,
        renormalize: bool = False,
        remote: bool | str = False,
        _sites: list[Site] | None = None,
        _function: str = "Ablation",
    ) -> None:
        function = _function
        _arguments.outside_trace(function)
        if how not in HOWS:
            raise _arguments.InvalidArgument(function, "how", how, f"expected one of {', '.join(map(repr, HOWS))}")
        sites = (
            _sites
            if _sites is not None
            else _checked_sites(model, function, heads, neurons, attention, mlp, experts, how)
        )
        if not sites:
            raise _arguments.InvalidArgument(
                function, "heads", None, "no site to ablate", "give heads=, neurons=, attention=, mlp= or experts="
            )
        if how == "zero" and reference is not None:
            raise _arguments.InvalidArgument(
                function,
                "reference",
                reference,
                "how='zero' replaces by zero and reads no reference",
                "leave reference=None, or pick how='mean' / 'resample'",
            )
        if how != "zero" and reference is None:
            raise _arguments.InvalidArgument(
                function,
                "reference",
                None,
                f"how={how!r} reads its values from a reference run",
                "give reference= prompts",
            )
        if renormalize and (how != "zero" or any(site.kind != "expert" for site in sites)):
            raise _arguments.InvalidArgument(
                function,
                "renormalize",
                renormalize,
                "renormalize applies to zeroing experts' routing weights alone",
                "pass renormalize=True only with experts= and how='zero'",
            )
        self.model = model
        self.sites = sites
        self.how = how
        self.renormalize = bool(renormalize)
        #: the reference run's length (its padded width), where its values are per position
        self.width: int | None = None
        #: the number of reference prompts a ``"resample"`` reads
        self.sources: int | None = None
        #: per (layer, block-relative value, or expert index): the mean, the means per position, or the reference values
        self.replacements: dict[tuple[int, Any], Tensor] = {}
        if how != "zero":
            self._read_reference(reference, remote, function)

    def _read_reference(self, reference: Any, remote: bool | str, function: str) -> None:
        batch = _arguments.prompts(self.model, reference, function=function, argument="reference")
        if self.how == "position_mean" and len(set(batch.lengths())) != 1:
            raise _arguments.InvalidArgument(
                function,
                "reference",
                f"prompts of {sorted(set(batch.lengths()))} tokens",
                "how='position_mean' averages each position over the reference prompts, so they must all have the same number of tokens",
                "give prompts of one length, or how='mean' (over every token)",
            )
        names: list[str] = []
        for site in self.sites:
            wanted = ("mlp.expert_indices", "mlp.expert_outputs") if site.kind == "expert" else (VALUES[site.kind],)
            names += [f"layers.{site.layer}.{name}" for name in wanted if f"layers.{site.layer}.{name}" not in names]
        cache = cache_values(self.model, batch.inputs, names, progress=False, remote=remote, dtype=torch.float32)
        mask = cache.attention_mask
        self.width, self.sources = mask.shape[1], mask.shape[0]
        for site in self.sites:
            found: dict[tuple[int, int | str], Tensor]  # by (layer, expert) or (layer, value name)
            if site.kind == "expert":
                outputs, indices = (
                    cache[f"layers.{site.layer}.mlp.expert_outputs"],
                    cache[f"layers.{site.layer}.mlp.expert_indices"],
                )
                found = {(site.layer, expert): _expert_share(outputs, indices, expert) for expert in site.columns}
            else:
                found = {(site.layer, VALUES[site.kind]): cache[f"layers.{site.layer}.{VALUES[site.kind]}"]}
            for key, values in found.items():
                if self.how == "mean":
                    values = _mean(values, mask)
                elif self.how == "position_mean":
                    values = values.mean(0)
                self.replacements[key] = values.float().cpu()

    def __repr__(self) -> str:
        return f"Ablation({len(self.sites)} sites, how={self.how!r})"

    # -- inside a trace -------------------------------------------------------------------

    def apply(self) -> None:
        """Ablate every site in the open trace's forward, on every prompt; call it before reading anything it changes."""
        _arguments.inside_trace("Ablation.apply")
        by_layer: dict[int, list[tuple[Site, slice]]] = {}
        for site in self.sites:
            by_layer.setdefault(site.layer, []).append((site, slice(None)))
        for layer in sorted(by_layer):
            self.edit_layer(layer, by_layer[layer])

    def edit_layer(self, layer: int, cells: list[tuple[Site, slice]]) -> None:
        """Ablate each ``(site, rows)`` of block ``layer`` on those rows of the batch, in the order the block computes the values."""
        block = self.model.layers[layer]
        for kind in ORDER:
            chosen = [(site, rows) for site, rows in cells if site.kind == kind]
            if not chosen:
                continue
            if kind == "expert":
                self._edit_experts(block.mlp, layer, chosen)
                continue
            owner, _, name = VALUES[kind].rpartition(".")
            host = getattr(block, owner)
            edited = getattr(host, name).clone()
            for site, rows in chosen:
                self._write(edited[rows], site)
            setattr(host, name, edited)

    def _replacement(self, key: tuple[int, Any], target: Tensor) -> Tensor:
        """What replaces ``target`` (``[rows, seq, ...]``), broadcastable to it, on its device and in its dtype."""
        if self.how == "zero":
            return torch.zeros((), dtype=target.dtype, device=target.device)
        source = self.replacements[key]
        if self.how != "mean":
            if target.shape[1] != self.width:
                raise _arguments.InvalidArgument(
                    "Ablation.apply",
                    "reference",
                    f"a reference of {self.width} positions",
                    f"the run has {target.shape[1]} positions: how={self.how!r} writes the reference's values position by position",
                    "give the run and the reference the same number of tokens",
                )
            if self.how == "resample" and self.sources not in (1, target.shape[0]):
                raise _arguments.InvalidArgument(
                    "Ablation.apply",
                    "reference",
                    f"{self.sources} prompts",
                    f"the run has {target.shape[0]} prompts: resampling takes one reference prompt for all, or one per prompt",
                    "give one reference prompt, or as many as the run has",
                )
        if self.how == "mean":
            source = source.reshape(1, 1, *source.shape)
        elif self.how == "position_mean":
            source = source[None]
        return source.to(device=target.device, dtype=target.dtype)

    def _write(self, target: Tensor, site: Site) -> None:
        replacement = self._replacement((site.layer, VALUES[site.kind]), target)
        if site.kind == "head":
            columns = list(site.columns)
            target[:, :, columns] = replacement.expand_as(target)[:, :, columns] if replacement.dim() else replacement
        elif site.kind == "neuron":
            columns = list(site.columns)
            target[..., columns] = replacement.expand_as(target)[..., columns] if replacement.dim() else replacement
        else:
            target[...] = replacement.expand_as(target)

    def _edit_experts(self, mlp: Any, layer: int, cells: list[tuple[Site, slice]]) -> None:
        if self.how == "zero":
            weights = mlp.expert_weights.clone()
            indices = mlp.expert_indices
            for site, rows in cells:
                hit = torch.zeros_like(indices[rows], dtype=torch.bool)
                for expert in site.columns:
                    hit |= indices[rows] == expert
                before = weights[rows]
                kept = before.masked_fill(hit, 0)
                if self.renormalize:
                    total, left = before.sum(-1, keepdim=True), kept.sum(-1, keepdim=True)
                    kept = torch.where(
                        left != 0, kept * (total / torch.where(left != 0, left, torch.ones_like(left))), kept
                    )
                weights[rows] = kept
            mlp.expert_weights = weights
            return
        indices = mlp.expert_indices
        outputs = mlp.expert_outputs
        routed = mlp.routed_output.clone()
        for site, rows in cells:
            for expert in site.columns:
                own = _expert_share(outputs[rows], indices[rows], expert)
                routed[rows] += self._replacement((layer, expert), own).expand_as(own) - own
        mlp.routed_output = routed


# -- the sweep ----------------------------------------------------------------------------


def _columns(model: StandardModel, over: str, layer: int, indices: Any, group_size: int, function: str) -> list[Site]:
    """The sites ``ablation_sweep`` ablates one at a time at block ``layer``."""
    if over == "sublayers":
        return [Site(layer, "attention"), Site(layer, "mlp")]
    kind = {"heads": "head", "neurons": "neuron", "experts": "expert"}[over]
    what = {"head": "attention heads", "neuron": "neurons", "expert": "experts"}[kind]
    chosen = _arguments.indices(
        indices, _width(model, layer, kind), function=function, argument="indices", what=f"{what} of block {layer}"
    )
    size = group_size if kind == "neuron" else 1
    return [Site(layer, kind, tuple(chosen[start : start + size])) for start in range(0, len(chosen), size)]


def _label(site: Site) -> str:
    if not site.columns:
        return site.kind
    if len(site.columns) == 1:
        return str(site.columns[0])
    return (
        f"{site.columns[0]}-{site.columns[-1]}"
        if list(site.columns) == list(range(site.columns[0], site.columns[-1] + 1))
        else ",".join(map(str, site.columns))
    )


def _sweep_layers(model: StandardModel, over: str, layers: Any, how: str, function: str) -> list[int]:
    """The blocks to sweep: those given (each checked), or every block that has the values ``over`` ablates."""
    needs = (
        ("self_attn.attention_output", "mlp.mlp_output")
        if over == "sublayers"
        else _needs({"heads": "head", "neurons": "neuron", "experts": "expert"}[over], how)
    )
    if layers is not None:
        chosen = _arguments.layers(model, layers, function=function)
        for layer in chosen:
            for name in needs:
                _require(model, layer, name)
        return chosen
    chosen = [
        layer for layer in range(model.num_layers) if all(_available(model, layer, name) is None for name in needs)
    ]
    if not chosen:
        for name in needs:
            _require(model, 0, name)
    return chosen


def ablation_sweep(
    model: StandardModel,
    prompts: Any,
    metric: Metric,
    over: str,
    *,
    how: str = "zero",
    reference: Any = None,
    layers: Iterable[int] | None = None,
    indices: Any = None,
    group_size: int = 1,
    renormalize: bool = False,
    progress: bool = True,
    remote: bool | str = False,
    cells_per_forward: int | None = None,
    memory_budget: int | None = None,
    logits_at: int | Sequence[int] | None = None,
) -> Sweep:
    """Ablate each head, neuron group, sublayer or expert alone and record ``metric(logits)``: a ``[layer, over]`` Sweep.

    ``over`` is ``"heads"`` (``axes == ("layer", "head")``), ``"neurons"``
    (groups of ``group_size`` consecutive neurons among ``indices``:
    ``("layer", "neuron")``, labelled ``"5"`` or ``"0-3"``), ``"sublayers"``
    (the attention's and the MLP's contributions: ``("layer", "sublayer")``,
    labelled ``"attention"`` and ``"mlp"``) or ``"experts"``
    (``("layer", "expert")``). ``how``, ``reference`` and ``renormalize`` as
    ``Ablation``'s; ``indices`` picks the heads, neurons or experts (all by
    default), ``layers`` the blocks (by default every block that has the
    values, e.g. a mixture's blocks for experts).

    ``metric_clean`` is the metric of the run without ablation and
    ``metric_corrupted`` the metric with every swept site ablated together,
    so ``normalized()`` is 1 where ablating the site leaves the metric and 0
    where it alone moves it as far as ablating them all. ``prompts`` are a
    prompt or a batch, strings or ids; ``metric`` maps the logits ``[batch,
    seq, vocab_size]`` to one number. The cells are packed along the batch
    axis (``cells_per_forward``, ``memory_budget``, ``logits_at`` as in
    ``patch_residual``); a pack at block ``i`` skips the blocks before it
    where it may, handing on the stream the unablated run had there.
    Everything, the reference's length included, is checked before the model runs.
    """
    function = "ablation_sweep"
    _arguments.outside_trace(function)
    batch = _arguments.prompts(model, prompts, function=function)
    if over not in OVER:
        raise _arguments.InvalidArgument(function, "over", over, f"expected one of {', '.join(map(repr, OVER))}")
    group_size = _arguments.count(group_size, function=function, argument="group_size")
    if group_size != 1 and over != "neurons":
        raise _arguments.InvalidArgument(
            function, "group_size", group_size, "groups are of neurons only", "leave group_size=1"
        )
    chosen = _sweep_layers(model, over, layers, how, function)
    per_layer = {layer: _columns(model, over, layer, indices, group_size, function) for layer in chosen}
    every = [site for layer in chosen for site in per_layer[layer]]
    ablation = Ablation(
        model, how=how, reference=reference, renormalize=renormalize, remote=remote, _sites=every, _function=function
    )
    seq = batch.input_ids.shape[1]
    if how in ("position_mean", "resample") and ablation.width != seq:
        raise _arguments.InvalidArgument(
            function,
            "reference",
            f"prompts of {ablation.width} positions",
            f"the prompts have {seq}: how={how!r} writes the reference's values position by position",
            "give prompts of the same number of tokens",
        )
    if how == "resample" and ablation.sources not in (1, len(batch)):
        raise _arguments.InvalidArgument(
            function,
            "reference",
            f"{ablation.sources} prompts",
            f"{len(batch)} prompts are ablated: give one reference prompt for all, or one per prompt",
        )
    forward, at, packing = planned(
        model,
        len(batch),
        seq,
        logits_at=logits_at,
        cells_per_forward=cells_per_forward,
        memory_budget=memory_budget,
        function=function,
    )
    width = max(len(columns) for columns in per_layer.values())
    widest = max(per_layer.values(), key=len)

    with torch.no_grad():
        skips = sorted(layer for layer in chosen if skippable(model, layer))
        metric_clean, streams = run_metric(
            model,
            batch.inputs,
            metric,
            remote,
            lambda: [model.layers[layer].layer_input.clone() for layer in skips],
            at,
        )
        metric_all, _ = run_metric(model, batch.inputs, metric, remote, ablation.apply, at)
        entering = dict(zip(skips, streams))

        values = torch.full((len(chosen), width), float("nan"), dtype=torch.float32)
        cells = [
            (row, layer, (col,), site) for row, layer in enumerate(chosen) for col, site in enumerate(per_layer[layer])
        ]

        def measure(layer: int, sites: list[Site]) -> list[float]:
            def edit(rows: list[slice]) -> None:
                ablation.edit_layer(layer, list(zip(sites, rows)))

            return run_pack(
                model,
                batch,
                len(sites),
                edit,
                metric=metric,
                remote=remote,
                forward=forward,
                layer=layer,
                entering=entering.get(layer),
            )

        forwards = measure_packs(values, cells, packing, measure, desc=f"ablating {over}", progress=progress)

    axis = {"heads": "head", "neurons": "neuron", "sublayers": "sublayer", "experts": "expert"}[over]
    site = {
        "heads": VALUES["head"],
        "neurons": VALUES["neuron"],
        "sublayers": f"{VALUES['attention']}, {VALUES['mlp']}",
        "experts": VALUES["expert"],
    }[over]
    labels = {"layer": [str(layer) for layer in chosen], axis: [_label(site) for site in widest]}
    return Sweep(values, ("layer", axis), labels, metric_clean, metric_all, site, forwards=forwards)
