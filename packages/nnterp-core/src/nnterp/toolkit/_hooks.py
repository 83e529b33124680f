"""The read-only path on plain forward hooks: standard values read at module boundaries, without a trace.

A call that only reads values (``cache_values``, ``extract_values``, the
streams of ``logit_lens``) pays a trace's fixed cost per forward: the
workers, the interleaver's handoffs at every module, the save machinery. Where every value it asks for is what a
module returns (or one element of it) or what a module is called with, the
same tensors come off ``register_forward_hook`` / ``register_forward_pre_hook``
on the HuggingFace modules around the model's plain forward.

A value qualifies (``boundary``) only where nothing stands between the
location and what a read returns: its descriptor is a plain ``EProperty``
(not derived, not scaled, not token-flat, no write-back view), its preprocess
returns what it is handed, its path names no operation inside a forward
(``source``) and no key function, no summand a sharded module would leave
partial, and the value is available on this checkpoint (not refuted by the
proof at load). Everything else, and any model or call this path does not
handle (``remote``, a family that rewrites its invokes or resets state per
call, a vision wrapper, tensor parallelism, offloaded or meta weights,
registered edits, a call inside a trace), goes to the nnsight path: ``plan``
says why.

The inputs are the ones a trace runs: the batch goes through the model's own
``_batch`` (nnsight's collation, mask-derived positions for left-padded rows,
the family's position shift, the model's dtype), then to the model's device,
and the forward runs under ``torch.no_grad()``. Each hook copies its value at
the moment the module hands it over, as a trace's ``.save()`` of a copy does,
and only a module's first call in the forward counts (the occurrence a trace
reads). Once every value is taken the forward is ended by a private
exception: nothing after the last value needed is computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import _tensor_parallel as tensor_parallel
from ..descriptors import SERVED, EProperty
from ..protocols import StandardModel
from ._arguments import loaded

#: the engines a read-only call may run on: ``auto`` takes the hooks where every value qualifies
ENGINES = ("auto", "hooks", "nnsight")


class _Done(Exception):
    """Raised by the last hook a call needs: the forward has handed over every value asked for."""


class NotAtBoundary(Exception):
    """A hooks read that cannot be completed here (a module that never ran, a value that is no tensor): run the nnsight path."""


def _identity(self: Any, value: Any) -> Any:
    return value


def _returns_its_value(function: Any) -> bool:
    """Whether a preprocess is ``return value`` and nothing else (a docstring aside): the bytecode of the identity."""
    code = getattr(function, "__code__", None)
    reference = _identity.__code__
    return (
        code is not None
        and code.co_argcount == 2
        and not code.co_kwonlyargcount
        and code.co_code == reference.co_code
        and not getattr(function, "__closure__", None)
    )


@dataclass(frozen=True)
class Boundary:
    """Where one standard value is read: ``module``'s output, first input or ``(args, kwargs)``, narrowed by its descriptor."""

    host: Any
    descriptor: EProperty
    module: torch.nn.Module
    last: str  # "output", "input" or "inputs"
    root: torch.nn.Module | None = None  # the model's module when the boundary was found

    def take(self, raw: Any) -> Tensor:
        """The value from what the module handed over, as the descriptor's read narrows it."""
        value = self.descriptor._serve(self.host, raw, self.last)
        if not isinstance(value, Tensor):
            raise NotAtBoundary(f"{self.descriptor.name} is a {type(value).__name__}, not a tensor")
        return value


def boundary(host: Any, value: str) -> Boundary | str:
    """Where ``host``'s value ``value`` is read, if at a module boundary; else why not (a sentence)."""
    descriptor = getattr(type(host), value, None)
    if not isinstance(descriptor, EProperty):
        return f"{value} is no standard value of {type(host).__name__}"
    if type(descriptor) is not EProperty:
        return f"{value} is a {type(descriptor).__name__}, not read at one location as it is"
    if descriptor._transform is not None:
        return f"{value} is served through a view (scaled, or in another layout)"
    if descriptor.summand:
        return f"{value} is a summand of a module's output"
    if descriptor.inside_forward():
        return f"{value} is read inside a forward (an operation in .source)"
    if descriptor._preprocess is not None and not _returns_its_value(descriptor._preprocess):
        return f"{value} is computed from what its location holds"
    if descriptor.reason(host) is not None:
        return f"{value} is unavailable: {descriptor.reason(host)}"
    if tensor_parallel.mesh_of(host) is not None:
        return "the model is sharded (tensor parallelism)"
    node, segments = descriptor._start(host, descriptor.key_for(host))
    *walk, last = segments
    if last not in SERVED:
        return f"{value}'s path ends in {last!r}"
    for segment in walk:
        child = node.__dict__.get(segment)
        if child is None:
            try:
                child = getattr(node, segment)
            except AttributeError:
                return f"{value}'s path names no module {segment!r}"
        node = child
    module = getattr(node, "_module", None)
    if not isinstance(module, torch.nn.Module):
        return f"{value}'s path ends at no module"
    select = descriptor.select(host) if callable(descriptor.select) else descriptor.select
    if last == "input" and select is not None:
        return f"{value} selects inside a module's first input"
    return Boundary(host, descriptor, module, last, host.root._module)


def model_reason(model: StandardModel, remote: Any = False) -> str | None:
    """Why this model, or this call, cannot take the hooks path at all; None where it can."""
    if remote:
        return "remote= runs on a server, through a trace"
    family = getattr(model, "family", None)
    if family is not None and (family.prepare_invoke is not None or family.on_fresh_call is not None):
        return f"the {family.name} family rewrites its invokes or resets state per call"
    if getattr(model, "processor", None) is not None:
        return "a vision-language wrapper (a processor prepares its inputs)"
    if getattr(model, "_edits", None):
        return "edits are registered on the model (model.edit): they run in a trace"
    if getattr(getattr(model, "interleaver", None), "interleaving", False):
        return "called inside a trace"
    device_map = getattr(model._module, "hf_device_map", None) if getattr(model, "dispatched", True) else None
    if isinstance(device_map, dict) and any(str(place) in ("disk", "meta") for place in device_map.values()):
        return "weights are offloaded to disk (device_map)"
    return None


def locate(hosts: Sequence[tuple[Any, str]]) -> list[Boundary] | str:
    """Each ``(host, value)``'s boundary on the loaded model, or why the first that is at none is not (``boundary``)."""
    found: list[Boundary] = []
    for host, value in hosts:
        where = boundary(host, value)
        if isinstance(where, str):
            return where
        found.append(where)
    return found


def plan(
    model: StandardModel, hosts: Sequence[tuple[Any, str]], remote: Any = False, memo: dict | None = None
) -> list[Boundary] | str:
    """Where each ``(host, value)`` is read at a module boundary; or why the call goes to the nnsight path.

    ``memo`` (a dict the caller keeps while the model's modules and refutations stay as they were, ``cache_values``'
    per-model plans) keeps what ``locate`` found for these hosts, so a later call asks only what can change between
    calls: the model and the call (``model_reason``), its weights, and whether its modules are still the ones run.
    """
    reason = model_reason(model, remote)
    if reason is not None:
        return reason
    # the modules hooked are the loaded ones: nnsight swaps them in at its first trace, so load them now
    loaded(model)
    root = model._module
    if model.__dict__.get("_nnterp_real_weights") is not root:
        if any(parameter.is_meta for parameter in root.parameters()):
            return "the model holds meta weights"
        model.__dict__["_nnterp_real_weights"] = root  # asked once per loaded module: weights do not go back to meta
    if memo is None:
        found = locate(hosts)
    else:
        located = memo.get("located")
        if located is None or located[0] is not root:  # found on other modules (before a dispatch): find again
            located = memo["located"] = (root, locate(hosts))
        found = located[1]
    if isinstance(found, str):
        return found
    if found and not any(module is found[0].module for module in root.modules()):
        return "the envoys hold modules the model no longer runs"
    return found


def refusal(reason: str) -> ValueError:
    """The error for ``engine="hooks"`` where a value does not qualify, ``reason`` saying which and why."""
    return ValueError(f"engine='hooks': {reason}; pass engine='auto' or 'nnsight' to read it through a trace")


def choose(
    model: StandardModel, hosts: Sequence[tuple[Any, str]], engine: str, remote: Any = False, memo: dict | None = None
) -> tuple[list[Boundary] | None, str]:
    """The boundaries to read (None: the nnsight path) and what to record: ``"hooks"``, or why nnsight ran.

    ``engine="hooks"`` where a value does not qualify is a ``ValueError`` saying which and why. ``memo``: ``plan``'s.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: pass one of {', '.join(map(repr, ENGINES))}")
    if engine == "nnsight":
        return None, "engine='nnsight' was asked for"
    found = plan(model, hosts, remote, memo)
    if isinstance(found, str):
        if engine == "hooks":
            raise refusal(found)
        return None, found
    return found, "hooks"


def model_inputs(model: StandardModel, inputs: tuple, kwargs: dict | None = None) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` a trace of one invoke ``inputs`` calls the model with: batched by the model, on its device."""
    kwargs = dict(kwargs or {})
    model._batch_size(*inputs, **kwargs)  # the checks a trace makes as each invoke is added
    args, call = model._batch([(inputs, kwargs)], "__call__")
    device = model.device
    if device is not None:

        def move(value: Any) -> Any:
            return value.to(device) if isinstance(value, Tensor) else value

        args = tuple(move(value) for value in args)
        call = {key: move(value) for key, value in call.items()}
    return args, call


def read(
    model: StandardModel,
    boundaries: Sequence[Boundary],
    inputs: tuple,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> list[Tensor]:
    """One plain forward of the invoke ``inputs``: each boundary's value, copied (to ``device``, floating ones cast to ``dtype``).

    Raises ``NotAtBoundary`` where a module never ran, or a value is no tensor: the caller runs the nnsight path.
    """
    taken: list[Tensor | None] = [None] * len(boundaries)
    remaining = [len(boundaries)]
    by_place: dict[tuple[int, str], list[int]] = {}
    modules: dict[int, torch.nn.Module] = {}
    if boundaries and boundaries[0].root is not model._module:
        raise NotAtBoundary("the model's modules were replaced since the values were located")
    for index, where in enumerate(boundaries):
        by_place.setdefault((id(where.module), where.last), []).append(index)
        modules[id(where.module)] = where.module

    target = None if device is None else torch.device(device)

    def keep(indices: list[int], raw: Any) -> None:
        for index in indices:
            if taken[index] is not None:
                continue  # a module called again: the first call is the one a trace reads
            tensor = boundaries[index].take(raw)
            cast = dtype if dtype is not None and tensor.is_floating_point() else None
            if cast is None and (target is None or tensor.device == target):
                taken[index] = tensor.detach().clone()  # what .to(copy=True) makes here, without parsing its arguments
            else:
                taken[index] = tensor.detach().to(device=device, dtype=cast, copy=True)
            remaining[0] -= 1
        if remaining[0] == 0:
            raise _Done

    handles = []
    try:
        for (key, last), indices in by_place.items():
            module = modules[key]
            if last == "output":
                handles.append(module.register_forward_hook(lambda _m, _a, output, _i=indices: keep(_i, output)))
            else:
                handles.append(
                    module.register_forward_pre_hook(
                        lambda _m, args, kwargs, _i=indices: keep(_i, (args, kwargs)), with_kwargs=True
                    )
                )
        args, kwargs = model_inputs(model, inputs)
        try:
            with torch.no_grad():
                model._module(*args, **kwargs)
        except _Done:
            pass
        finally:
            model.__dict__["_nnterp_cache"] = None  # what a trace's end clears (StandardizedTransformer.interleave)
    finally:
        for handle in handles:
            handle.remove()
    missing = [boundaries[index].descriptor.name for index, tensor in enumerate(taken) if tensor is None]
    if missing:
        raise NotAtBoundary(f"the forward never reached {', '.join(missing)}")
    return taken  # type: ignore[return-value]
