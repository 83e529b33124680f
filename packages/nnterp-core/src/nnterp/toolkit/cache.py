"""Caching standard values over many prompts: ``cache_values`` and the ``ValueCache`` it returns.

What transformer-lens users have in ``run_with_cache(names_filter=...)``, on
the model's own modules: only the values asked for are read, batch by batch,
without gradients, and moved off the model's device as each batch ends, so the
memory the model's device holds is one batch's.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import nnsight
from nnsight.intervention.interleaver import OutOfOrderError

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..components.layer import RESIDUAL_TERMS
from ..components.standard import Standard
from ..descriptors import declared_values, withdrawals
from ..errors import InvalidArgument, Unavailable
from ..protocols import StandardModel
from . import _arguments
from . import _hooks as hooks
from .cache_size import DEFAULT_MAX_BYTES, CacheEstimate, estimated, readable
from .names import Layout, hook_of, standard_name

#: the block's children whose values sit between its stream boundaries: the mixers before ``layer_mid``, the MLP before ``layer_output``
MIXERS = ("self_attn", "linear_attn")
FEED_FORWARD = ("mlp",)

#: the group name that stands for every term a block adds to its stream, its ``contributions()``:
#: ``"layers.*.contributions"`` caches them all, on every family, whatever they are
CONTRIBUTIONS = "contributions"

_LAYER_NAME = re.compile(r"^layers\.(\*|-?\d+)\.(.+)$")
_HOOK_NAME = re.compile(r"^blocks\.(\*|-?\d+)\.(.+)$")


class ValueCache(Mapping):
    """Standard values read over a set of prompts, by standard name (``"layers.3.layer_output"``, ``"logits"``).

    A read-only mapping from name to tensor, every tensor's first axis the
    prompts in the order given. Prompts were left-padded to one common length,
    so ``attention_mask`` (``[prompts, seq]``, 1 on real tokens) says which
    positions are padding, and position ``-1`` is every prompt's last token.
    ``input_ids`` are the token ids the model read.

    ``cache["layers.*.layer_output"]`` stacks a value over every layer,
    ``[num_layers, prompts, ...]`` (each layer must have been cached).
    ``skipped`` names what a wildcard (``"*"``, ``"layers.*.*"``) left out, each
    with the reason this checkpoint lacks it.

    A value asked for by its TransformerLens hook name (``"blocks.3.attn.hook_q"``)
    is keyed by that name and read in TransformerLens's layout
    (``nnterp.toolkit.names``); its standard name reads it in the standard one.
    """

    def __init__(
        self,
        values: dict[str, Tensor],
        input_ids: Tensor,
        attention_mask: Tensor,
        num_layers: int,
        *,
        spellings: dict[str, tuple[str, Layout]] | None = None,
        contributions: dict[int, tuple[str, ...]] | None = None,
        engine: str = "nnsight",
        fallback: str | None = None,
        skipped: dict[str, str] | None = None,
    ) -> None:
        self._values = dict(values)
        #: the values a wildcard stood for that the checkpoint lacks, each with the reason (``model.support()``'s)
        self.skipped = dict(skipped or {})
        #: which path read the values: ``"hooks"`` (plain forward hooks) or ``"nnsight"`` (a trace per batch)
        self.engine = engine
        #: why the nnsight path ran where the hooks path was not taken (a value not at a module boundary...), else None
        self.fallback = fallback
        self.input_ids = input_ids
        self.attention_mask = attention_mask
        self.num_layers = num_layers
        #: each block's terms (``Layer.contributions()``, block-relative names), in the order the block adds them
        self.contributions = dict(contributions or {})
        #: each TransformerLens name asked for (one layer each) -> its standard name and layout
        self._spellings = dict(spellings or {})

    def __getitem__(self, name: str) -> Tensor:
        if name in self._values:
            return self._values[name]
        if name in self._spellings:
            standard, layout = self._spellings[name]
            return layout.to_transformer_lens(self._values[standard])
        match = _HOOK_NAME.match(name)
        if match is not None and match.group(1) == "*":
            return torch.stack([self[f"blocks.{index}.{match.group(2)}"] for index in range(self.num_layers)])
        if match is not None and f"blocks.{int(match.group(1)) % self.num_layers}.{match.group(2)}" in self._spellings:
            return self[f"blocks.{int(match.group(1)) % self.num_layers}.{match.group(2)}"]
        match = _LAYER_NAME.match(name)
        if match is not None and match.group(1) == "*":
            return self.stack(match.group(2))
        if match is not None:
            # layers.-1.x is the last layer's
            canonical = f"layers.{int(match.group(1)) % self.num_layers}.{match.group(2)}"
            if canonical in self._values:
                return self._values[canonical]
        raise KeyError(f"{name!r} was not cached; cached: {', '.join(self._values) or '(nothing)'}")

    def __iter__(self) -> Iterator[str]:
        spelled: dict[str, list[str]] = {}
        for hook, (standard, _) in self._spellings.items():
            spelled.setdefault(standard, []).append(hook)
        for name in self._values:
            yield from spelled.get(name, [name])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def stack(self, value: str) -> Tensor:
        """A block value over every layer, ``[num_layers, prompts, ...]``: ``stack("self_attn.attention_output")``."""
        missing = [index for index in range(self.num_layers) if f"layers.{index}.{value}" not in self._values]
        if missing:
            raise KeyError(f"layers.*.{value} was not cached on layers {missing}; cache 'layers.*.{value}'")
        return torch.stack([self._values[f"layers.{index}.{value}"] for index in range(self.num_layers)])

    def __repr__(self) -> str:
        rows = ", ".join(f"{name}: {tuple(self[name].shape)}" for name in self)
        return f"ValueCache({len(self.attention_mask)} prompts, {{{rows}}})"


# -- which values, in which order -------------------------------------------------


def block_order(block: Any) -> list[str]:
    """Every value of a block, relative to it (``"self_attn.attention_probabilities"``), in the order the forward serves them.

    Designed from the components' declaration order, which the components keep
    for this: a ``Layer`` declares its stream boundaries and residual terms in
    forward order (``layer_input``, ``layer_input_rescaling``,
    ``attention_norm_output``, ``layer_mid``, ... ``layer_output``); an
    ``Attention`` or ``Mlp`` declares its contribution first and then its
    interior in forward order, and the contribution is what the module produces
    last. So a mixer's (``self_attn``, ``linear_attn``) interior then
    contribution go before ``layer_mid`` (the block's ``AFTER_MIXERS``), the
    MLP's before ``per_layer_input_output`` (its ``AFTER_MLP``). On a parallel block the
    attention still runs first (GPT-J, Phi, GPT-NeoX).
    """
    children: dict[str, list[str]] = {}
    for name in (*MIXERS, *FEED_FORWARD):
        child = block.__dict__.get(name)
        if isinstance(child, Standard):
            values = list(declared_values(type(child)))
            children[name] = [f"{name}.{value}" for value in values[1:] + values[:1]]
    order: list[str] = []
    after_mixers, after_mlp = getattr(block, "AFTER_MIXERS", "layer_mid"), getattr(block, "AFTER_MLP", "layer_output")
    for value in declared_values(type(block)):
        if value == after_mixers:
            order += [name for mixer in MIXERS for name in children.get(mixer, [])]
        if value == after_mlp:
            order += [name for ff in FEED_FORWARD for name in children.get(ff, [])]
        order.append(value)
    return order


def orders_by_structure(block: Any, known: dict[tuple, list[str]]) -> list[str]:
    """``block_order(block)``, worked out once per block structure in ``known`` (a call's blocks mostly share one).

    A block's order follows from its class and its sublayers' classes alone (``block_order`` reads their
    declarations), so blocks alike in those share it.
    """
    key = (type(block), *(type(block.__dict__.get(name)) for name in (*MIXERS, *FEED_FORWARD)))
    order = known.get(key)
    if order is None:
        order = known[key] = block_order(block)
    return order


def _root_values(model: StandardModel) -> tuple[list[str], list[str]]:
    """The model's root values, split into those served before its blocks run and those after (its output, ``logits``)."""
    before: list[str] = []
    after: list[str] = []
    for name in declared_values(type(model)):
        attribute = getattr(type(model), name)
        key = attribute.key if isinstance(attribute.key, str) else None
        (after if key == "output" else before).append(name)
    return before, after


def wildcard(name: str) -> bool:
    """Whether ``name`` stands for values by a wildcard in the value's place: ``"*"``, ``"layers.<i or *>.*"``, ``"layers.<i or *>.mlp.*"``."""
    if name == "*":
        return True
    match = _LAYER_NAME.match(name)
    return match is not None and _value_prefix(match.group(2)) is not None


def _value_prefix(value: str) -> str | None:
    """What a block-relative wildcard's values start with (``""`` for ``*``, ``"mlp."`` for ``mlp.*``); None for a value named."""
    if value == "*":
        return ""
    if value.endswith(".*") and "*" not in value[:-2]:
        return value[:-1]
    return None


def expand_names(
    model: StandardModel,
    names: str | Sequence[str],
    *,
    skipped: dict[str, str] | None = None,
    fresh_calls: bool = False,
) -> list[str]:
    """The requested names, ``*`` expanded over every layer and negative layers counted from the end, in forward order.

    A wildcard in the value's place stands for every value there: ``"*"`` for
    every root and block value, ``"layers.<i or *>.*"`` for a block's,
    ``"layers.<i or *>.mlp.*"`` for one sublayer's (``self_attn``, ``mlp``,
    ``linear_attn``). Of those, the ones this checkpoint lacks are left out,
    each with its reason in ``skipped`` (where given). Raises ``KeyError`` for
    a name that is no standard value of the model (or a wildcard that matches
    none), and ``Unavailable`` (with the family's reason) for a value named
    that this checkpoint lacks. With ``fresh_calls`` (a caller that runs only
    calls starting from no cache), a value such a call serves as None (a
    recurrent ``state_input``: ``EProperty.none_when_fresh``) is lacking too.
    """
    if isinstance(names, str):
        names = [names]
    before, after = _root_values(model)
    orders: dict[int, list[str]] = {}
    known: dict[tuple, list[str]] = {}
    ranked: dict[str, tuple[int, int, int]] = {}
    wild: set[str] = set()
    for name in names:
        if name == "*":
            for root in before + after:
                if root not in ranked:
                    wild.add(root)
                    ranked[root] = (0, 0, before.index(root)) if root in before else (2, 0, after.index(root))
            name = "layers.*.*"
        match = _LAYER_NAME.match(name)
        if match is None:
            if name not in before + after:
                raise KeyError(
                    f"{name!r} is no standard value: name a root value ({', '.join(before + after)}), "
                    "a block value as 'layers.<i or *>.<value>', or every value as '*', 'layers.<i or *>.*' or "
                    "'layers.<i or *>.<mlp or self_attn>.*' (model.support() lists them)"
                )
            wild.discard(name)  # named as well: its availability is asked for
            ranked[name] = (0, 0, before.index(name)) if name in before else (2, 0, after.index(name))
            continue
        where, value = match.groups()
        if where != "*" and not -model.num_layers <= int(where) < model.num_layers:
            size = model.num_layers
            raise KeyError(
                f"{name!r}: the model has {size} layers, indices 0 to {size - 1} (or -{size} to -1 from the end)"
            )
        layers = range(model.num_layers) if where == "*" else [int(where) % model.num_layers]
        prefix = _value_prefix(value)
        matched = False
        for index in layers:
            order = orders.get(index)
            if order is None:
                order = orders[index] = orders_by_structure(model.layers[index], known)
            if prefix is not None:
                for each in order:
                    full = f"layers.{index}.{each}"
                    if not each.startswith(prefix) or full in ranked:
                        continue
                    wild.add(full)
                    ranked[full] = (1, index, order.index(each))
                matched = matched or any(each.startswith(prefix) for each in order)
                continue
            terms = _block_terms(model, index) if value == CONTRIBUTIONS else (value,)
            if not terms:
                block = model.layers[index]
                reason = (
                    type(block).layer_output_rescaling.reason(block)
                    if hasattr(type(block), "layer_output_rescaling")
                    else None
                )
                raise Unavailable(block, CONTRIBUTIONS, reason or "this block adds no terms to one stream")
            for each in terms:
                if each not in order:
                    raise KeyError(
                        f"{each!r} is no value of layers[{index}]; its values, in forward order: {', '.join(order)}"
                    )
                full = f"layers.{index}.{each}"
                wild.discard(full)  # named as well: its availability is asked for
                ranked[full] = (1, index, order.index(each))
        if prefix is not None and not matched:
            sublayers = sorted({each.split(".")[0] for index in layers for each in orders[index] if "." in each})
            raise KeyError(
                f"{name!r} matches no value: the blocks' sublayers are {', '.join(sublayers)}; "
                f"'layers.{where}.*' stands for every value of a block"
            )
    for name in list(ranked):
        host, value = _host(model, name)
        descriptor = getattr(type(host), value)
        reason = descriptor.reason(host)
        if reason is None and fresh_calls:
            reason = getattr(descriptor, "none_when_fresh", None)
        if reason is None:
            continue
        if name not in wild:
            raise Unavailable(host, value, reason)
        del ranked[name]
        if skipped is not None:
            skipped[name] = reason
    return sorted(ranked, key=ranked.__getitem__)


def _block_terms(model: StandardModel, index: int) -> tuple[str, ...]:
    """Block ``index``'s terms, block-relative: its ``contributions()``, or the attention's and the MLP's where it has none."""
    contributions = getattr(model.layers[index], "contributions", None)
    return tuple(contributions()) if contributions is not None else ("self_attn.attention_output", "mlp.mlp_output")


def _host(model: StandardModel, name: str) -> tuple[Any, str]:
    """The envoy a standard name's value is read on, and the value's attribute name."""
    *path, value = name.split(".")
    host: Any = model
    for segment in path:
        host = host[int(segment)] if segment.lstrip("-").isdigit() else getattr(host, segment)
    return host, value


def last_block_needed(model: StandardModel, requested: list[str]) -> int | None:
    """The last block ``requested`` (expanded names) need when none is read after the blocks: the forward can end there; else None."""
    after = _root_values(model)[1]
    layers = [_layer_of(name) for name in requested]
    known = [layer for layer in layers if layer is not None]
    if not layers or any(name in after for name in requested) or len(known) < len(layers):
        return None
    return max(known)


def _layer_of(name: str) -> int | None:
    match = _LAYER_NAME.match(name)
    return None if match is None else int(match.group(1))


# -- reading them ------------------------------------------------------------------


@torch.no_grad()
def cache_values(
    model: StandardModel,
    prompts: Any,
    names: str | Sequence[str],
    *,
    batch_size: int = 8,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    progress: bool = True,
    remote: bool | str = False,
    stop_at_layer: int | None = None,
    engine: str = "auto",
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> ValueCache:
    """Read standard values over many prompts, batch by batch: a ``ValueCache`` of ``[prompts, ...]`` tensors.

    ``names`` are standard names: ``"logits"``, ``"layers.3.layer_output"``,
    ``"layers.3.self_attn.attention_probabilities"``; ``*`` stands for every
    layer (``"layers.*.mlp.mlp_output"``) and a negative index counts from the
    end. In the value's place it stands for every value there: ``"*"`` every
    standard value of the model, ``"layers.*.*"`` every block's,
    ``"layers.3.*"`` block 3's, ``"layers.*.mlp.*"`` (``self_attn.*``) one
    sublayer's. A wildcard caches only the values this checkpoint serves: the
    others (a value the family lacks, attention patterns under a fused
    kernel...) are in ``cache.skipped`` with the reason; a value named that it
    lacks raises its ``Unavailable``.

    ``max_bytes`` (4 GiB by default; None for no limit) bounds what the cache
    will hold, estimated from the values' layouts before anything runs
    (``estimate_cache``): above it the call is an ``InvalidArgument`` naming the
    estimate and the largest values. ``"layers.<i or *>.contributions"`` stands for every term the block
    adds to its stream (``Layer.contributions()``: the sublayers'
    contributions, and a rescaling's or a per-layer input's terms where it has
    them), as ``decompose_resid`` needs. TransformerLens hook names are read as the standard value that holds
    the same tensor (``"blocks.3.hook_resid_pre"``, ``"blocks.*.attn.hook_z"``;
    ``nnterp.toolkit.names``), keyed by the hook's name, one key per layer, in
    TransformerLens's layout. Only what is asked for is read, in forward order
    within each trace (``block_order``), without gradients.

    ``prompts`` are strings or token ids (a ``[seq]`` or ``[prompts, seq]``
    int tensor, a list of ids, a list of id lists, the tokenizer's encoding
    with its ``attention_mask``). They are tokenized once, together, and
    left-padded to the longest prompt overall, whatever side the tokenizer
    pads, so position ``-1`` is every prompt's last token, every batch has the
    same length and the batches concatenate along the first axis; nnsight
    gives each left-padded row its own positions from the mask, so a row's
    values do not depend on its padding (up to float rounding).
    ``cache.attention_mask`` marks the real tokens, ``cache.input_ids`` the
    ids read. Each batch's values are copied to ``device`` (floating ones
    cast to ``dtype``, if given) inside its trace, so the model's device
    holds one batch at a time.

    Unless ``logits`` (or another value read after the blocks) is asked for,
    each forward ends after the last block a value needs: what the final norm
    and the unembedding would compute is never read, so it is not computed,
    and the logits take no memory. ``stop_at_layer=k`` ends each forward after
    block ``k`` (negative from the end, never wrapped around). Every argument
    is checked before anything runs: a batch size under 1, a block outside the
    model, a value past ``stop_at_layer`` (or ``logits`` with it) are an
    ``InvalidArgument``; a value the checkpoint lacks raises its
    ``Unavailable``. It runs forwards of its own, so it is refused inside an
    open trace (``ToolkitInsideTrace``).

    A family whose forward serves values in another order than its components
    declare them (Falcon binds its values before its rotary queries and keys)
    fails the first batch with ``OutOfOrderError``; that batch and the rest
    are then read with one worker per value, which needs no order.

    Where every value is read at a module boundary (what a module returns or
    is called with: ``layer_input``, ``layer_output``, ``attention_output``,
    ``mlp_output`` on most families), each batch runs as the model's plain
    forward with forward hooks instead of a trace (``nnterp.toolkit._hooks``):
    the same inputs, the same tensors bit for bit, without a trace's fixed
    cost. ``engine="auto"`` (the default) takes it when every value
    qualifies, ``engine="nnsight"`` always traces, ``engine="hooks"`` refuses
    a value that does not qualify. ``cache.engine`` says which ran and
    ``cache.fallback`` why the trace did.
    """
    function = "cache_values"
    _arguments.outside_trace(function)
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    _check_dtype(dtype, function)
    _check_engine(engine, function)
    names = _arguments.names(names, function=function)
    if stop_at_layer is not None:
        stop_at_layer = _arguments.layer(model, stop_at_layer, function=function, argument="stop_at_layer")
    max_bytes = _checked_limit(max_bytes, function)
    batch = _arguments.prompts(model, prompts, function=function)
    planned = _planned(model, names)
    requested, hosts = planned.requested, planned.hosts
    if not requested:
        raise InvalidArgument(
            function,
            "names",
            names,
            f"no value this checkpoint serves: {_skipped_line(planned.skipped)}",
            "ask for values it serves (model.support() lists them)",
        )
    if max_bytes is not None:
        _check_size(_estimate(model, planned, batch, dtype), max_bytes, function)
    if stop_at_layer is not None:
        beyond = [
            name
            for name in requested
            if name not in planned.served_first and ((index := _layer_of(name)) is None or index > stop_at_layer)
        ]
        if beyond:
            raise InvalidArgument(
                function,
                "stop_at_layer",
                stop_at_layer,
                f"the forward ends after block {stop_at_layer}, before {', '.join(beyond)}",
                "pass a later stop_at_layer, or None to read every value asked for",
            )
    if stop_at_layer is None:
        # nothing read after the blocks (logits): each forward ends after the last block a value needs
        stop_at_layer = planned.stop
    reader = BatchReader(model, hosts, requested, stop_at_layer, device, dtype, remote, engine, planned.located)

    values: list[Tensor] = []
    starts = range(0, len(batch), batch_size)
    with _arguments.left_padding(model):
        for start in tqdm(starts, desc=function) if progress else starts:
            found = reader(batch[start : start + batch_size].inputs)
            if len(batch) <= batch_size:
                values = found  # one batch: its copies are the cache
                break
            if not values:
                # every batch has the common padded length: one tensor per value, filled batch by batch
                values = [
                    torch.empty((len(batch), *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
                    for tensor in found
                ]
            for whole, part in zip(values, found):
                whole[start : start + part.shape[0]] = part
            del found
    return ValueCache(
        dict(zip(requested, values)),
        batch.input_ids,
        batch.attention_mask,
        model.num_layers,
        spellings=planned.spellings,
        contributions=planned.terms,
        engine=reader.engine,
        fallback=reader.fallback,
        skipped=planned.skipped,
    )


def estimate_cache(
    model: StandardModel, prompts: Any, names: str | Sequence[str], *, dtype: torch.dtype | None = None
) -> CacheEstimate:
    """What ``cache_values(model, prompts, names, dtype=dtype)`` would hold, without running the model: a ``CacheEstimate``.

    Each value's shape is its layout's for these prompts (tokenized and padded
    as ``cache_values`` pads them), its dtype ``dtype`` where given and the
    value is floating, else the model's (int64 for expert indices); bytes are
    ``numel * itemsize``. Exact for every value whose layout sizes all its axes
    (``unsized`` lists any other); a family that computes a value in another
    dtype than its weights' (router logits upcast to float32 under bfloat16)
    differs by that. ``skipped`` lists what a wildcard left out, with reasons.
    """
    function = "estimate_cache"
    _check_dtype(dtype, function)
    names = _arguments.names(names, function=function)
    batch = _arguments.prompts(model, prompts, function=function)
    return _estimate(model, _planned(model, names), batch, dtype)


def _estimate(
    model: StandardModel, planned: _Plan, batch: _arguments.Batch, dtype: torch.dtype | None
) -> CacheEstimate:
    found = estimated(model, planned.hosts, planned.requested, len(batch), batch.input_ids.shape[1], dtype)
    found.skipped.update(planned.skipped)
    return found


def _check_size(estimate: CacheEstimate, max_bytes: int, function: str) -> None:
    """Refuse a cache estimated above ``max_bytes``, naming the estimate, its largest values and the argument to raise."""
    if estimate.total <= max_bytes:
        return
    largest = ", ".join(f"{name} ({readable(size)})" for name, size in estimate.largest())
    raise InvalidArgument(
        function,
        "max_bytes",
        max_bytes,
        f"the cache would hold about {readable(estimate.total)} ({estimate.total} bytes) in {len(estimate.bytes)} values, "
        f"more than max_bytes ({readable(max_bytes)}); the largest: {largest}",
        f"pass max_bytes={estimate.total} or more (None for no limit), or ask for fewer values, prompts or a smaller dtype=",
    )


def _checked_limit(max_bytes: Any, function: str) -> int | None:
    """``max_bytes`` as a whole number of bytes (a float such as ``8e9`` rounded down), or None for no limit."""
    if max_bytes is None:
        return None
    if isinstance(max_bytes, float) and math.isfinite(max_bytes) and max_bytes >= 1:
        return int(max_bytes)
    return _arguments.count(max_bytes, function=function, argument="max_bytes")


def _skipped_line(skipped: dict[str, str]) -> str:
    shown = list(skipped.items())[:3]
    more = f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""
    return "; ".join(f"{name}: {reason}" for name, reason in shown) + more


def _check_dtype(dtype: Any, function: str) -> None:
    """``dtype`` is None or a floating torch dtype (what the values are cast to)."""
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise InvalidArgument(
            function,
            "dtype",
            dtype,
            "expected a floating torch dtype or None",
            "pass torch.bfloat16, torch.float16, torch.float32 ... or None",
        )


def _check_engine(engine: Any, function: str) -> None:
    if engine not in hooks.ENGINES:
        raise InvalidArgument(function, "engine", engine, f"expected one of {', '.join(map(repr, hooks.ENGINES))}")


class BatchReader:
    """Reads one batch's values, ``reader(batch)``: on the hooks path while every value sits at a module boundary, else
    by a trace, with one worker per value where the family's forward serves them out of their declared order.

    ``engine`` (``"auto"``, ``"hooks"``, ``"nnsight"``) is the caller's; ``reader.engine`` says which path read the
    batches and ``reader.fallback`` why the trace did. ``located`` is ``_hooks.plan``'s memo, or None.
    """

    def __init__(
        self,
        model: StandardModel,
        hosts: list,
        requested: list[str],
        stop: int | None,
        device: Any,
        dtype: Any,
        remote: Any,
        engine: str,
        located: dict | None = None,
    ) -> None:
        self._trace = partial(
            _read_batch,
            model,
            hosts=hosts,
            requested=requested,
            stop_at_layer=stop,
            device=device,
            dtype=dtype,
            remote=remote,
        )
        self._model, self._device, self._dtype, self._asked = model, device, dtype, engine
        self._boundaries, self._ran = hooks.choose(model, hosts, engine, remote, located)
        #: whether the values need one worker each: found on the first traced batch
        self._separate: bool | None = None

    @property
    def engine(self) -> str:
        return "hooks" if self._boundaries is not None else "nnsight"

    @property
    def fallback(self) -> str | None:
        return None if self._boundaries is not None else self._ran

    def __call__(self, batch: dict[str, Tensor]) -> list[Tensor]:
        if self._boundaries is not None:
            try:
                return hooks.read(self._model, self._boundaries, (batch,), device=self._device, dtype=self._dtype)
            except hooks.NotAtBoundary as error:
                if self._asked == "hooks":
                    raise hooks.refusal(str(error)) from None
                self._boundaries, self._ran = None, str(error)
        if self._separate is None:
            try:
                found = self._trace(batch, separate=False)
                self._separate = False
                return found
            except Exception as error:
                if not _out_of_order(error):
                    raise
                # this family's forward serves its values in another order than its
                # components declare them: give each value a worker of its own
                self._separate = True
        return self._trace(batch, separate=self._separate)


def _out_of_order(error: BaseException) -> bool:
    """Whether a trace failed on a value read after the forward had passed it: here, or on a server, whose exception
    nnsight's ``RemoteError`` carries as text (the server's traceback, ending with the exception's type and message)."""
    from nnsight.intervention.backends.remote import RemoteError

    if isinstance(error, OutOfOrderError):
        return True
    last = str(error).rstrip().splitlines()[-1:] if isinstance(error, RemoteError) else []
    return bool(last) and last[0].startswith(
        ("nnsight.intervention.interleaver.OutOfOrderError:", "nnterp.errors.OutOfOrder:")
    )


#: where a model keeps ``cache_values``' plans: ``(id(model), root module, withdrawals, {names: _Plan})``
_PLANS = "_nnterp_value_plans"
#: the most lists of names a model keeps plans for (past it, the memo starts over)
_MOST_PLANS = 64


class _Plan:
    """What a ``cache_values`` call's names come to on a model, before anything runs: a function of the model's
    classes, its loaded modules and the proof's refutations, kept per model (``_planned``) so each call does not
    work it out again."""

    __slots__ = ("checks", "hosts", "located", "requested", "served_first", "skipped", "spellings", "stop", "terms")

    def __init__(self, model: StandardModel, names: list[str]) -> None:
        standard = [name if wildcard(name) else standard_name(model, name) for name in names]
        self.spellings = _spellings(model, names)
        #: the values a wildcard stands for that this checkpoint lacks, each with its reason
        self.skipped: dict[str, str] = {}
        self.requested = expand_names(
            model, standard, skipped=self.skipped, fresh_calls=True
        )  # every call is a fresh one
        #: the root values served before the blocks run (what ``stop_at_layer`` does not end)
        self.served_first = _root_values(model)[0]
        #: the block each forward may end after, where nothing is read after the blocks
        self.stop = last_block_needed(model, self.requested)
        self.hosts = [_host(model, name) for name in self.requested]
        #: each block's terms, what ``ValueCache.contributions`` holds
        self.terms = {index: _block_terms(model, index) for index in range(model.num_layers)}
        #: the availabilities a function decides (a family's reason reading the config, the attention kernel...):
        #: ``(host, descriptor, reason)``, asked again on each call that reuses the plan
        self.checks = _asked_each_call(model, self.hosts + [_host(model, name) for name in self.skipped])
        #: the hooks path's memo (``_hooks.plan``): where each value sits on the loaded modules
        self.located: dict = {}

    def holds(self) -> bool:
        """Whether every availability a function decides is still what it was when the plan was made."""
        return all(descriptor.reason(host) == reason for host, descriptor, reason in self.checks)


def _asked_each_call(model: StandardModel, hosts: list[tuple[Any, str]]) -> list[tuple[Any, Any, str | None]]:
    """The requested values, and every block's residual terms (``contributions()``), whose availability a function
    decides rather than a string: what a kept plan asks again."""
    pairs = [(host, getattr(type(host), value)) for host, value in hosts]
    for index in range(model.num_layers):
        block = model.layers[index]
        declared = declared_values(type(block))
        pairs += [(block, declared[term]) for term in RESIDUAL_TERMS if term in declared]
    return [
        (host, descriptor, descriptor.reason(host)) for host, descriptor in pairs if callable(descriptor._unavailable)
    ]


def _planned(model: StandardModel, names: list[str]) -> _Plan:
    """``_Plan(model, names)``, kept on the model while its loaded modules and the proof's refutations are as they were.

    A plan that raised is not kept (the next call raises again). Calls that name TransformerLens hooks are
    planned afresh each time: their translation asks the model's configuration.
    """
    if any(hook_of(name) is not None for name in names):
        return _Plan(model, names)
    root, withdrawn = model._module, withdrawals()
    memo: tuple[int, Any, Any, dict[tuple[str, ...], _Plan]] | None = model.__dict__.get(_PLANS)
    # the model's id: an edited copy (model.edit()) starts from a copy of its __dict__, and its own root values
    # are read on it, not on the model it was copied from
    if (
        memo is None
        or memo[0] != id(model)
        or memo[1] is not root
        or memo[2] != withdrawn
        or len(memo[3]) >= _MOST_PLANS
    ):
        memo = model.__dict__[_PLANS] = (id(model), root, withdrawn, {})
    key = tuple(names)
    kept = memo[3].get(key)
    if kept is not None and kept.holds():
        return kept
    kept = memo[3][key] = _Plan(model, names)
    return kept


def _spellings(model: StandardModel, names: list[str]) -> dict[str, tuple[str, Layout]]:
    """Each TransformerLens name among ``names``, one per layer (``blocks.*`` expanded, negative layers counted), with its standard name and layout."""
    spellings: dict[str, tuple[str, Layout]] = {}
    for name in names:
        hook = hook_of(name)
        if hook is None:
            continue
        if not hook.in_block:
            spellings[name] = (standard_name(model, name), hook.layout)
            continue
        match = _HOOK_NAME.match(name)
        if match is None:
            continue  # block-relative: standard_name says what is wrong with it
        where = match.group(1)
        layers = range(model.num_layers) if where == "*" else [int(where) % model.num_layers]
        for index in layers:
            concrete = f"blocks.{index}.{match.group(2)}"
            spellings[concrete] = (standard_name(model, concrete), hook.layout)
    return spellings


def _read_batch(
    model: StandardModel,
    batch: dict[str, Tensor],
    hosts: list[tuple[Any, str]],
    requested: list[str],
    stop_at_layer: int | None,
    device: str | torch.device,
    dtype: torch.dtype | None,
    remote: bool | str,
    separate: bool,
) -> list[Tensor]:
    """One trace over one batch: every requested value, copied to ``device``.

    By default one worker reads them all in ``block_order``. With ``separate``
    each value is read by a worker of its own (an invoke without input, which
    sees the whole batch), so no order between them is needed: the fallback
    for a family whose forward serves values in another order than its
    components declare them.
    """
    read: list[Any] = [None] * len(hosts)

    def take(index: int) -> None:
        host, value = hosts[index]
        tensor = getattr(host, value)
        cast = dtype if dtype is not None and tensor.is_floating_point() else None
        read[index] = tensor.detach().to(device=device, dtype=cast, copy=True).save()

    stop_value = f"layers.{stop_at_layer}.layer_output"
    with model.trace(remote=remote) as tracer:
        nnsight.save(read)  # filled in place by take(): a server hands the list back by name
        with tracer.invoke(batch):
            if not separate:
                for index in range(len(hosts)):
                    take(index)
                if stop_at_layer is not None:
                    if requested[-1:] != [stop_value]:
                        model.layers[stop_at_layer].layer_output  # noqa: B018 - wait for the block to end
                    tracer.stop()
        if separate:
            for index in range(len(hosts)):
                with tracer.invoke():
                    take(index)
            if stop_at_layer is not None:
                with tracer.invoke():
                    model.layers[stop_at_layer].layer_output  # noqa: B018 - wait for the block to end
                    tracer.stop()
    if stop_at_layer is not None:
        # nnsight stops the forward with an exception that stays in a reference cycle with the frames it passed
        # through, so everything they held (the model's cache, the stream, through each frame's caller this batch's
        # values) outlives the call until the cyclic collector runs; the cycle is young: collected here, in well
        # under a millisecond, where a full collection takes a large fraction of a second
        gc.collect(1)
    return list(read)
