"""The residual stream as vLLM's fused blocks carry it: two halves, whose sum is the stream.

A vLLM decoder block is called ``layer(positions, hidden_states, residual)``
and returns ``(hidden_states, residual)``: the norm before each sublayer adds
the two (``fused_add_rms_norm``) and hands the sum on as the next residual.
Neither half is the stream (each differs from transformers' stream by the
other); their sum is, to float32 rounding. ``Halves`` serves that sum.
"""

from __future__ import annotations

from typing import Any

from nnsight.intervention.interleaver import Mediator

import torch

from ..descriptors import EProperty


def _unchanged(envoy: Any, view: Any, served: Any) -> Any:  # pragma: no cover - Halves._write_back replaces it
    return view


class Halves(EProperty):
    """A stream an engine passes in two halves: read as their sum, written back as ``(stream, zeros)``.

    ``key`` names the location holding the pair: a call's ``inputs``, whose
    positional arguments ``first`` and ``first + 1`` are the halves (a block's
    ``positions, hidden_states, residual``: ``first=1``; a fused norm's
    ``hidden_states, residual``: ``first=0``), or a module's ``output`` tuple.
    A second half of None (vLLM's first block, before any residual exists)
    counts as zeros.

    How a write is split: the whole stream goes into the first half and the
    second half becomes zeros (stays None where it was None), so the fused
    norm's ``first + second`` is the stream exactly (``x + 0 == x``). An
    in-place edit of what a read returns reaches the model the same way, when
    the worker moves on; a read left unedited hands the model its own halves
    back, so reading changes nothing.
    """

    def __init__(self, key: str, description: str, first: int = 0, **settings: Any) -> None:
        super().__init__(key, description, **settings)
        #: the position of the first half among the call's positional arguments (``inputs`` keys only)
        self.first = first
        # a transform makes the read hold its value until the worker moves on: _write_back then hands it back
        self._transform = _unchanged

    def _pair(self, raw: Any, last: str) -> tuple[Any, Any]:
        if last == "inputs":
            args = raw[0]
            return args[self.first], args[self.first + 1] if len(args) > self.first + 1 else None
        return raw[0], raw[1]

    def _serve(self, obj: Any, raw: Any, last: str) -> Any:
        first, second = self._pair(raw, last)
        return first if second is None else first + second

    def _halved(self, raw: Any, last: str, stream: Any) -> Any:
        """``raw`` with its halves replaced by ``(stream, zeros)``."""
        _, second = self._pair(raw, last)
        rest = None if second is None else torch.zeros_like(second)
        if last == "inputs":
            args, kwargs = raw
            args = (
                *args[: self.first],
                stream,
                *(() if len(args) <= self.first + 1 else (rest,)),
                *args[self.first + 2 :],
            )
            return args, kwargs
        return type(raw)((stream, rest, *raw[2:]))

    def _write_back(self, obj: Any, view: Any, served: Any, raw: Any, last: str, select: Any = None) -> Any:
        first, second = self._pair(raw, last)
        if second is None or torch.equal(view, first + second):
            return raw
        return self._halved(raw, last, view)

    def _put(self, obj: Any, value: Any, location: str, last: str, raw: Any) -> None:
        Mediator.swap(location, self._halved(raw, last, value))
