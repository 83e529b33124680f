"""``.grad`` on a standard value where no backward pass will reach it raises, instead of reading None.

nnsight serves gradients only inside ``with loss.backward():``, where it swaps
its own ``Tensor.grad`` in for the length of the backward. Anywhere else in a
trace, ``value.grad`` is torch's attribute: None on every activation, and the
user's next line fails on the None. For the length of a trace of a
``StandardizedTransformer``, ``Tensor.grad`` is this guard: a tensor nnterp
served as a standard value (``mark`` tags it as it is read) whose gradient
autograd will never store raises ``GradientOutsideBackward`` with the form that
works; every other tensor (the user's own, another thread's, a parameter, one
that retains its gradient) reads exactly as torch reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from .errors import GradientOutsideBackward

#: torch's own attribute, which the guard defers to: a descriptor (torch's stubs declare an instance attribute, Tensor | None)
NATIVE: Any = torch.Tensor.grad
#: the attribute a standard value's tensor carries: its spelling, for the message
SPELLING = "_nnterp_spelling"

FORM = """with model.trace(prompt):
    value = model.{value}
    metric = model.logits[:, -1].sum()
    with metric.backward():
        gradient = value.grad.save()

(read the value in the forward as any other, take any scalar of the forward, and read only .grad inside backward())"""


#: the fix where the weights are frozen (NDIF's servers load every model so)
TRACK = "make the stream entering block 0 require grad, first thing in the trace: model.layers[0].layer_input.requires_grad_(True)"


def track(model: Any) -> None:
    """Make the stream entering block 0 require grad where the weights are frozen, inside a trace and before any other read.

    NDIF's servers load every model with ``requires_grad_(False)``, so no
    activation is tracked; with the stream entering block 0 a leaf that
    requires grad, every later value is in the graph exactly as it is with
    trainable weights (its gradient included). Where it already requires grad
    (trainable weights) this does nothing.
    """
    stream = model.layers[0].layer_input
    if not stream.requires_grad:
        stream.requires_grad_(True)


def _read(tensor: torch.Tensor) -> Any:
    value = tensor.__dict__.get(SPELLING)
    if value is None or tensor.retains_grad or (tensor.is_leaf and tensor.requires_grad):
        # a tensor nnterp did not serve (the user's own, another thread's), or one whose gradient autograd stores
        return NATIVE.__get__(tensor)
    why = ""
    if not tensor.requires_grad:
        why = (
            f"the model's weights are frozen, so nothing computed from them is tracked; {TRACK} and "
            if torch.is_grad_enabled()
            else "the trace runs under torch.no_grad(), so no gradient can reach it; trace without no_grad and "
        )
    raise GradientOutsideBackward(
        f"{value}.grad is read outside a backward pass, where it is always None: nnsight serves gradients only "
        f"inside `with metric.backward():`, as the backward reaches each value; {why}read it there:\n"
        + FORM.format(value=value)
    )


GUARD = property(
    _read, NATIVE.__set__, NATIVE.__delete__, "torch's Tensor.grad, raising where no backward pass will reach it"
)


@contextmanager
def guarded() -> Iterator[None]:
    """Swap the guard in for ``Tensor.grad`` while a trace runs; nnsight's backward swaps its own over it and back."""
    previous = torch.Tensor.grad
    torch.Tensor.grad = GUARD  # type: ignore[assignment]  # a descriptor on the class; torch's stubs declare an attribute
    try:
        yield
    finally:
        torch.Tensor.grad = previous


def mark(value: Any, spelling: str) -> None:
    """Tag a served tensor with the standard value it is, so a ``.grad`` read can name it."""
    if isinstance(value, torch.Tensor):
        value.__dict__[SPELLING] = spelling
