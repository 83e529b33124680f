"""Standard values whole on a model transformers sharded across ranks (tensor parallelism under ``torchrun``).

nnsight gathers a module's two sides (a column-parallel output, a
row-parallel input) itself. A value read inside a forward (``.source``) it
hands over as this rank's piece: the queries of half the heads, the neurons
of half the MLP, one rank's partial sum of each expert's output. Here each
standard value is made whole by its layout, in one place, on every read and
written back as this rank's piece:

- a model axis (``num_heads``, ``num_kv_heads``, ``intermediate_size`` ...)
  that holds ``1 / world`` of the size the model declares is the sharded one:
  an all-gather along it on read; the edited whole is sliced back on write
  (no collective), and only where this rank's slice changed;
- a value declared ``summand`` (a term of the sum its module returns) read in a
  module whose output the plan leaves a partial sum (``moe_tp_experts``) is an
  all-reduce on read; an edit goes back as the edited whole on rank 0 and zeros
  elsewhere, which the module's own reduce turns into the edit on every rank.

Every rank runs the same intervention code, so every rank reaches the same
collective with the same decision (it is made from sizes, never from values).
``bridge`` holds, for the life of a sharded model, the patches nnsight 0.8.1
lacks against transformers 5.23 (``nnterp._patches``); see docs/compatibility.md.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from . import layouts


def bridge(model: Any) -> None:
    """Close the two gaps between nnsight 0.8.1's tensor parallelism and transformers 5.23 for the life of ``model``.

    Installs ``nnterp._patches.transformers.PARAMETER_PLAN`` (``_get_parameter_plan``
    where nnsight imports it) and ``nnterp._patches.nnsight.BACKWARD_GRAD_FOR_BLOCKS``
    (inside ``with metric.backward():``, nnsight's ``Tensor.grad`` for the
    block's reads alone) when a sharded model is built, before nnsight wraps
    it; they stay installed while the model lives (every trace of it needs
    them) and are undone when it is collected, or by ``nnterp._patches.release(model)``.
    """
    from ._patches import hold
    from ._patches.nnsight import BACKWARD_GRAD_FOR_BLOCKS
    from ._patches.transformers import PARAMETER_PLAN

    hold(model, PARAMETER_PLAN, BACKWARD_GRAD_FOR_BLOCKS)


def wanted(model: Any, load_kwargs: dict) -> bool:
    """Whether this load shards the model: ``distributed_config=``, ``tp_plan=``, or a module already sharded."""
    from nnsight.modeling.tp.envoys import wants_tensor_parallel

    return load_kwargs.get("tp_plan") is not None or wants_tensor_parallel(model, load_kwargs)


def mesh_of(envoy: Any) -> Any:
    """The tensor-parallel mesh of ``envoy``'s model, or None when it is not sharded.

    Asked on every read: the root is found through the parent links
    themselves (what ``Envoy.root`` follows, without a property call a level).
    """
    root = envoy
    while (link := root.__dict__.get("_parent")) is not None:
        root = link()
    module = root.__dict__.get("_module")
    known = root.__dict__.get("_nnterp_mesh")
    if known is None or known[0] is not module:
        from nnsight.modeling.tp import device_mesh

        known = root.__dict__["_nnterp_mesh"] = (module, device_mesh(module))
    return known[1]


class Piece(NamedTuple):
    """How a read on this rank relates to the whole value: sharded along ``axis``, or a partial sum (``axis`` None)."""

    mesh: Any
    axis: int | None

    def whole(self, local: torch.Tensor) -> torch.Tensor:
        """Every rank's piece assembled: an all-gather along ``axis``, or an all-reduce of a partial sum."""
        from torch.distributed.tensor import DTensor, Partial, Shard

        placement = Partial() if self.axis is None else Shard(self.axis)
        return DTensor.from_local(local, self.mesh, [placement], run_check=False).full_tensor()

    def whole_shape(self, local: torch.Tensor) -> tuple[int, ...]:
        """The shape of the whole value ``local`` is this rank's piece of."""
        shape = list(local.shape)
        if self.axis is not None:
            shape[self.axis] *= self.mesh.size()
        return tuple(shape)

    def local(self, whole: torch.Tensor) -> torch.Tensor:
        """This rank's piece of ``whole``: its slice along ``axis``; for a partial, ``whole`` on rank 0 and zeros elsewhere."""
        rank, world = self.mesh.get_local_rank(), self.mesh.size()
        if self.axis is None:
            # zeros still on the graph: every rank's backward must reach the same all-reduce
            return whole if rank == 0 else whole * 0
        return whole.chunk(world, dim=self.axis)[rank]


def piece(prop: Any, envoy: Any, location: str, value: Any) -> Piece | None:
    """How ``value`` (read for ``prop`` on ``envoy`` at ``location``) is a piece of the whole, or None when it is whole.

    Raises ``ValueError`` for a value whose model axis is neither the declared
    size nor an even share of it: a piece nothing here knows how to assemble.
    """
    if not isinstance(value, torch.Tensor) or value.ndim == 0:
        return None
    mesh = mesh_of(envoy)
    if mesh is None:
        return None
    if getattr(prop, "summand", False) and _partial_output(envoy, location):
        return Piece(mesh, None)
    dims = prop.dims
    if dims is None or len(dims) != value.ndim:
        return None
    world = mesh.size()
    short = []
    for index, axis in enumerate(dims):
        if axis in layouts.INPUT_AXES:
            continue
        try:
            size = layouts.axis_size(envoy, axis)
        except ValueError:
            continue
        if value.shape[index] == size:
            continue
        if value.shape[index] * world != size:
            raise ValueError(
                f"{prop.name}: under tensor parallelism over {world} ranks its {axis} axis holds "
                f"{value.shape[index]} of {size}, neither the whole nor an even share; "
                "load with a tp_size that divides the model's head counts and intermediate size"
            )
        short.append(index)
    if len(short) > 1:
        raise ValueError(
            f"{prop.name}: sharded along {len(short)} axes {[dims[i] for i in short]}; only one can be gathered"
        )
    return Piece(mesh, short[0]) if short else None


def _partial_output(envoy: Any, location: str) -> bool:
    """Whether ``location`` is inside the forward of a module whose output the plan leaves a partial sum on each rank."""
    from nnsight.modeling.tp import SIDES

    if ".source." not in location:
        return False
    module = location.split(".source.", 1)[0]  # the module whose forward runs the operation
    fragments = envoy.interleaver.fragments
    style, _ = fragments.style_at(module) if fragments is not None else (None, None)
    return SIDES.get(style, {}).get("output") == "partial"


def read_whole(prop: Any, envoy: Any, value: Any, plain: bool) -> Any:
    """The whole of ``value``, which ``prop``'s read just served on a sharded model; an edit to it goes back as this rank's piece.

    The read left a write-back waiting on the worker's mediator (its own
    transform's, or, for a ``plain`` read, one that swaps the location's value
    back); it is wrapped so that an edited whole is first copied, as this
    rank's piece, into the tensor the read served. A value already whole is
    served as it is and a plain read's write-back dropped.
    """
    from nnsight.intervention.eproperty import WriteBack
    from nnsight.intervention.interleaver import Mediator

    if getattr(value, "_nnterp_whole", False):
        return value  # a repeated read, answered with the whole it was first served as
    mediator = Mediator.current(prop.name)
    held = mediator.transform
    if held is None:
        return value
    found = piece(prop, envoy, held.location, value)
    if found is None:
        if plain:
            mediator.transform = None
        return value
    whole = found.whole(value)
    whole.__dict__["_nnterp_whole"] = True  # as setattr does on a tensor; a mark torch's stubs do not declare
    # where autograd records, the model goes on from the whole, so a backward reaches the value as served
    differentiated = torch.is_grad_enabled() and whole.requires_grad
    # a partial's piece is not a slice of the whole, so only a copy tells whether the whole was edited
    before = whole.detach().clone() if found.axis is None and not differentiated else None

    def write_back() -> Any:
        if differentiated:
            local = found.local(_SumGradients.apply(whole, found.mesh.get_group()))
            if plain and _holds(location := held.fn(), value):
                # the location takes the piece in place of the model's tensor: copied into it, a result its own op
                # saved for the backward (a softmax's probabilities) would be modified in place and the backward refused
                return _replaced(location, value, local)
            value.copy_(local)
            return held.fn()
        local = found.local(whole)
        edited = not torch.equal(whole, before) if before is not None else not torch.equal(local, value)
        if edited:
            value.copy_(local)
        return held.fn()

    mediator.transform = WriteBack(write_back, whole, prop, held.location, held.occurrence)
    return whole


def _holds(found: Any, old: torch.Tensor) -> bool:
    """Whether ``found`` (a location's value) is ``old`` itself or holds it among its items (a view of it is not)."""
    if found is old:
        return True
    if isinstance(found, dict):
        found = list(found.values())
    return isinstance(found, (list, tuple)) and any(_holds(item, old) for item in found)


def _replaced(found: Any, old: torch.Tensor, new: torch.Tensor) -> Any:
    """``found`` (a location's value: a tensor, or the call's arguments around one) with ``old`` itself swapped for ``new``."""
    if found is old:
        return new
    if isinstance(found, (list, tuple)):
        items = [_replaced(item, old, new) for item in found]
        return type(found)(*items) if hasattr(found, "_fields") else type(found)(items)
    if isinstance(found, dict):
        return {key: _replaced(item, old, new) for key, item in found.items()}
    return found


class _SumGradients(torch.autograd.Function):
    """The identity, whose backward sums the gradient over the ranks.

    Each rank's forward goes on from its own piece of a gathered whole, so the
    gradient each rank finds for the whole covers its piece alone; summed, it
    is the gradient of the whole on every rank (what ``.grad`` of the value reads).
    """

    @staticmethod
    def forward(ctx: Any, whole: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return whole.view_as(whole)

    @staticmethod
    def backward(ctx: Any, gradient: torch.Tensor) -> tuple[torch.Tensor, None]:
        import torch.distributed as distributed

        summed = gradient.contiguous().clone()
        distributed.all_reduce(summed, group=ctx.group)
        return summed, None
