"""What a recurrent mixer knows once per call of its module: the kernel that fires, the call's arguments.

A mixer's values are read at a kernel call inside its forward, and which
kernel fires depends on the call (a prompt or one decode step over a cached
state). The first value read in a call works that out from the call's
arguments and records it; the call's other values find the record. Records
live on the worker (the greenlet running the intervention code), so two
invokes never share one and none outlives its run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from nnsight.intervention.interleaver import Mediator


def call_index(envoy: Any) -> int:
    """Which call of ``envoy``'s module the worker's next read lands in.

    Pinned by ``tracer.iter`` to step k, a read is served at the k-th
    occurrence of its location, so it is in call k. Otherwise it is how many
    times the module's ``.output`` has been passed since the worker started:
    inside call c that many have returned, and between calls it names the one
    about to start.
    """
    mediator = Mediator.current(envoy.path)
    if mediator.iteration:
        return mediator.iteration
    return mediator.occurrence(f"{envoy.path}.output")


def per_call(envoy: Any, key: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per call of ``envoy``'s module, under ``key``; the record is kept until another call."""
    mediator = Mediator.current(envoy.path)
    records = mediator.__dict__.setdefault("_nnterp_calls", {})
    call = call_index(envoy)
    found = records.get((envoy.path, key))
    if found is not None and found[0] == call:
        return found[1]
    value = compute()
    records[(envoy.path, key)] = (call, value)
    return value


@contextmanager
def pinned(envoy: Any, occurrence: int | None) -> Iterator[None]:
    """Pin this worker's reads to occurrence ``occurrence`` of their location, as ``tracer.iter[n]`` does.

    A pinned read is served at that occurrence and relaxes the pin, so one
    read per ``with``. The pin the worker had is restored on the way out.
    """
    mediator = Mediator.current(envoy.path)
    previous, mediator.iteration = mediator.iteration, occurrence
    try:
        yield
    finally:
        mediator.iteration = previous
