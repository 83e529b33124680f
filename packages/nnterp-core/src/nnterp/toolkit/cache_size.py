"""The memory a ``cache_values`` call will take, from the values' layouts, before anything runs: ``CacheEstimate``.

Each value's shape is its layout's (``nnterp.layouts``) for the batch: the
prompts and the padded length on the input axes, the model's sizes (heads,
``intermediate_size``, ``top_k``, ``vocab_size`` ...) on the others. Its element
size is the cast ``dtype`` where one is given and the value is floating, else
the model's dtype (int64 for an integer layout, the routing's expert indices).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from .. import layouts
from ..protocols import StandardModel

__all__ = ["DEFAULT_MAX_BYTES", "CacheEstimate", "estimated", "readable"]

#: the most a ``cache_values`` call holds unless its ``max_bytes=`` says more: 4 GiB
DEFAULT_MAX_BYTES = 4 * 2**30


@dataclass(frozen=True)
class CacheEstimate:
    """What a cache of these values over these prompts holds: each value's shape, dtype and bytes, and the values left out.

    ``shapes`` / ``dtypes`` / ``bytes`` are by standard name, in forward order.
    ``total`` is their sum. A value whose layout leaves an axis unsized (a
    family's own axis no envoy declares) is in ``unsized`` with why, and
    counts for nothing in ``total``, a lower bound then. ``skipped`` holds the
    values a wildcard left out, each with the reason the checkpoint lacks it.
    """

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, torch.dtype]
    bytes: dict[str, int]
    unsized: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """The bytes of every sized value together."""
        return sum(self.bytes.values())

    def largest(self, count: int = 3) -> list[tuple[str, int]]:
        """The ``count`` biggest values, ``(name, bytes)``, biggest first."""
        return sorted(self.bytes.items(), key=lambda item: -item[1])[:count]

    def __repr__(self) -> str:
        biggest = ", ".join(f"{name}: {readable(size)}" for name, size in self.largest())
        return f"CacheEstimate({readable(self.total)} in {len(self.bytes)} values; largest {biggest or '(none)'})"


def estimated(
    model: StandardModel,
    hosts: list[tuple[Any, str]],
    names: list[str],
    prompts: int,
    seq: int,
    dtype: torch.dtype | None,
) -> CacheEstimate:
    """The estimate for the values ``names`` (read on ``hosts``) over ``prompts`` prompts padded to ``seq`` tokens."""
    floating = dtype if dtype is not None else getattr(model._module, "dtype", torch.float32)
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, torch.dtype] = {}
    sizes: dict[str, int] = {}
    unsized: dict[str, str] = {}
    for name, (host, value) in zip(names, hosts):
        layout = getattr(type(host), value).layout
        if layout is None:
            unsized[name] = "its value declares no layout"
            continue
        shape = layouts.expected_shape(host, layout, (prompts, seq))
        if None in shape:
            axes = [axis for axis, size in zip(layouts.dims(layout), shape) if size is None]
            unsized[name] = f"no envoy declares the size of its axes {', '.join(axes)}"
            continue
        kind = torch.int64 if _integer(layout) else floating
        sized = cast(tuple[int, ...], tuple(shape))  # no None: checked above
        shapes[name], dtypes[name] = sized, kind
        sizes[name] = math.prod(sized) * kind.itemsize
    return CacheEstimate(shapes, dtypes, sizes, unsized)


def _integer(layout: Any) -> bool:
    """Whether a jaxtyping layout holds integers (``Int[...]``: expert indices)."""
    return all(name.startswith(("int", "uint")) for name in getattr(layout, "dtypes", ()) or ("float",))


def readable(size: int) -> str:
    """A byte count as people read it: ``"1.5 GiB"``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
