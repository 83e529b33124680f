"""Assignments to standard values, checked against the value's layout before the model takes them.

A tensor of the wrong rank, size, dtype or device would otherwise fail deep
inside the model's forward, in torch's words, after the model ran half way (or,
broadcast, not fail at all). Two checks, one message:

- before the worker parks on the location (``check_before``), on a text
  block: what is known without running the model: the rank, the model's own
  sizes (``hidden_size``, ``num_kv_heads`` ...), and in a call without a cache
  the invoke's ``batch`` and ``seq``; an assignment written before anything is
  read is refused before the model runs at all;
- at the location (``check_against``): the exact shape, dtype and device of
  the value the user would read there, which is the ground truth for every value.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from . import layouts
from ._cache import given_cache
from ._spelling import spelled
from .errors import WriteMismatch


class Call(NamedTuple):
    """The call a trace is about to make, as far as the write checks need it: its token ids' sizes."""

    rows: int
    seq: int
    #: a single forward without a cache, where every text block's seq, query and key axes are the tokens'
    plain: bool

    @classmethod
    def of(cls, args: tuple, kwargs: dict, generating: bool) -> Call | None:
        """The call ``(args, kwargs)`` makes, or None where its tokens are not a ``[batch, seq]`` tensor."""
        tokens = kwargs.get("input_ids")
        if tokens is None:
            tokens = kwargs.get("inputs_embeds")
        if tokens is None and args and isinstance(args[0], torch.Tensor):
            tokens = args[0]
        if not isinstance(tokens, torch.Tensor) or tokens.ndim < 2:
            return None
        plain = not generating and given_cache(kwargs) is None
        return cls(int(tokens.shape[0]), int(tokens.shape[1]), plain)


def in_text_blocks(envoy: Any) -> bool:
    """Whether ``envoy`` is a text block or inside one: where the kit proves every value has its layout's shape."""
    blocks = envoy.root.__dict__.get("layers")
    node = envoy
    while node is not None and node is not blocks:
        node = node.parent
    return node is not None


def call_tokens(envoy: Any, mediator: Any) -> tuple[int, int] | None:
    """This invoke's ``(batch, seq)`` when the call runs without a cache (a text block's input axes), else None."""
    call = getattr(envoy.root, "_nnterp_call", None)
    if call is None or not call.plain:
        return None
    rows = mediator.batch_group[1] if mediator.batch_group else call.rows
    return rows, call.seq


def _floating(layout: Any) -> bool | None:
    """Whether the layout holds floating-point numbers (``Float[...]``), integers (``Int[...]``), or says neither."""
    dtypes = getattr(layout, "dtypes", ())
    if any(name.startswith("float") for name in dtypes):
        return True
    if any(name.startswith("int") for name in dtypes):
        return False
    return None


def _shape(shape: Any) -> str:
    return "[" + ", ".join("?" if size is None else str(size) for size in shape) + "]"


def _given(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {_shape(value.shape)} ({str(value.dtype).removeprefix('torch.')}, on {value.device})"
    return f"a {type(value).__name__}"


def _fail(
    prop: Any, envoy: Any, value: Any, expected: tuple, problem: str, fix: str, dtype: Any = None
) -> WriteMismatch:
    layout = prop.layout
    axes = layouts.dims(layout) if layout is not None else ()
    if axes and len(axes) == len(expected):
        sizes = ", ".join(f"{axis}={'?' if size is None else size}" for axis, size in zip(axes, expected))
        wanted = f"{layouts.layout_name(layout)} [{sizes}]"
    else:
        wanted = f"shape {_shape(expected)}"
    if dtype is not None:
        wanted += f" ({str(dtype).removeprefix('torch.')})"
    return WriteMismatch(f"{spelled(envoy, prop.name)} = {_given(value)}: {problem}; it takes {wanted}. {fix}")


def _sizes_wrong(wrong: list) -> str:
    return ", ".join(f"{axis} is {got}, not {want}" for axis, want, got in wrong)


def _static_sizes(prop: Any, envoy: Any) -> tuple | None:
    """The layout's sizes that do not depend on the input, on a text block; None elsewhere. Kept per envoy and value.

    An input axis stays None here and is filled from the call; the model's own
    sizes (``hidden_size``, ``num_kv_heads`` ...) are read once.
    """
    cache = envoy.__dict__.setdefault("_nnterp_sizes", {})
    if prop.name not in cache:
        layout = prop.layout
        known = layout is not None and in_text_blocks(envoy)
        cache[prop.name] = layouts.expected_shape(envoy, layout, None) if known else None
    return cache[prop.name]


def check_before(prop: Any, envoy: Any, value: Any, mediator: Any) -> None:
    """Refuse ``value`` for ``prop`` on ``envoy`` where its layout already says it cannot fit.

    Only on the text blocks, whose values the kit proves are laid out as their
    layouts say; elsewhere ``check_against`` alone decides, at the location.
    """
    static = _static_sizes(prop, envoy) if isinstance(value, torch.Tensor) else None
    if static is None:
        return
    layout = prop.layout
    axes = layouts.dims(layout)
    tokens = call_tokens(envoy, mediator)
    expected = tuple(
        tokens[layouts.INPUT_AXES[axis]] if axis in layouts.INPUT_AXES and tokens is not None else size
        for axis, size in zip(axes, static)
    )
    if value.ndim != len(expected):
        raise _fail(
            prop,
            envoy,
            value,
            expected,
            f"{value.ndim} axes where the layout has {len(expected)}",
            "Give one size per axis, in that order.",
        )
    wrong = [
        (axis, want, got) for axis, want, got in zip(axes, expected, value.shape) if want is not None and want != got
    ]
    if wrong:
        raise _fail(
            prop,
            envoy,
            value,
            expected,
            _sizes_wrong(wrong),
            f"Give {', '.join(f'{axis}={want}' for axis, want, _ in wrong)}.",
        )
    floating = _floating(layout)
    if floating is not None and value.is_floating_point() != floating:
        kind = "a floating-point" if floating else "an integer"
        raise _fail(prop, envoy, value, expected, f"it needs {kind} tensor", "Convert it with .to(...) first.")


def check_against(prop: Any, envoy: Any, value: Any, current: Any, shape: tuple | None = None) -> None:
    """Refuse ``value`` unless it has the shape, dtype and device of ``current``, what a read of ``prop`` returns here.

    ``shape`` is the whole value's where ``current`` is this rank's piece of it (tensor parallelism).
    """
    if not isinstance(current, torch.Tensor):
        return
    expected = tuple(current.shape) if shape is None else tuple(shape)
    if not isinstance(value, torch.Tensor):
        raise _fail(prop, envoy, value, expected, "it is not a tensor", "Assign a torch.Tensor.", current.dtype)
    if tuple(value.shape) != expected:
        if value.ndim != len(expected):
            problem = f"{value.ndim} axes where the value has {len(expected)}"
        else:
            axes = layouts.dims(prop.layout) if prop.layout is not None else ()
            names = axes if len(axes) == len(expected) else tuple(f"axis {index}" for index in range(len(expected)))
            problem = _sizes_wrong(
                [(axis, want, got) for axis, want, got in zip(names, expected, value.shape) if want != got]
            )
        raise _fail(
            prop,
            envoy,
            value,
            expected,
            problem,
            "Give a tensor of exactly that shape (expand or index it first).",
            current.dtype,
        )
    if value.dtype != current.dtype:
        dtype = str(current.dtype).removeprefix("torch.")
        raise _fail(
            prop,
            envoy,
            value,
            expected,
            f"the model computes it in {dtype}",
            f"Convert it with .to(torch.{dtype}).",
            current.dtype,
        )
    if value.device != current.device:
        raise _fail(
            prop,
            envoy,
            value,
            expected,
            f"the model holds it on {current.device}",
            f"Move it with .to({str(current.device)!r}).",
            current.dtype,
        )
