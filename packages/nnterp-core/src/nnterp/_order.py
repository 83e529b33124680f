"""Reads and writes the forward could not serve, said in standard names: out of order, or never computed.

nnsight ends a trace whose worker still waits on a location with
``OutOfOrderError: 'model.model.layers.0.input.i0' was requested but the model
already ran past it``: a native path, and the same words whether the model had
passed the location or never reached it (a branch this call did not take).
``EProperty`` catches that error where the user's line parked and raises one of
these instead, naming the value, the one read before it, the rule and the fix.
"""

from __future__ import annotations

import ast
from typing import Any, cast

from ._pitfalls import read_in_backward
from ._spelling import spelled
from .errors import NeverRan, OutOfOrder

RULE = (
    "within one invoke, standard values are read and written in the order the forward computes them: "
    "block by block, and inside a block layer_input, the attention's values, attention_output, layer_mid, "
    "the MLP's values, then layer_output"
)
FIX = (
    "Read {value} before it (reorder the lines), or in an invoke of its own, which follows the forward "
    "separately: `with model.trace() as tracer:` then `with tracer.invoke(prompt): ...` once per group of values."
)
#: what a location string ends in, after the module or operation it belongs to
_SUFFIXES = (".input", ".output", ".skip", ".fn")


def note_served(mediator: Any, prop: Any, envoy: Any) -> None:
    """Remember the standard value this worker was last served, for the next out-of-order message."""
    mediator.__dict__["_nnterp_last"] = (prop.name, envoy)


def translated(prop: Any, envoy: Any, verb: str, mediator: Any) -> OutOfOrder | None:
    """The error to raise in place of nnsight's ``OutOfOrderError`` for ``prop`` on ``envoy``, or None to keep it.

    Kept for a worker inside ``tracer.iter`` (a step the run did not make is
    how a loop ends, and nnsight warns instead of raising).
    """
    pending = getattr(mediator, "pending", None)
    if mediator.iteration != 0 or pending is None or pending.provider is None:
        return None
    here = spelled(envoy, prop.name)
    if mediator.interleaver is not envoy.root.interleaver:
        return read_in_backward(here, verb)  # a backward's own worker: it serves gradients alone
    base = _base(pending.provider)
    if not _ran(mediator, base):
        return NeverRan(f"{here} was {verb} but never computed on this call: {_why(envoy.root, mediator, base)}.")
    last = mediator.__dict__.get("_nnterp_last")
    after = f" after {spelled(last[1], last[0])}" if last is not None and last != (prop.name, envoy) else ""
    return OutOfOrder(
        f"{here} was {verb}{after}, but the forward computes it earlier and had already run past it: "
        f"{RULE}. {FIX.format(value=here)}"
    )


def _base(provider: str) -> str:
    for suffix in _SUFFIXES:
        if provider.endswith(suffix):
            return provider[: -len(suffix)]
    return provider


def _ran(mediator: Any, base: str) -> bool:
    return mediator.occurrence(f"{base}.input") > 0 or mediator.occurrence(f"{base}.output") > 0


def _why(root: Any, mediator: Any, base: str) -> str:
    """Why the module or operation at ``base`` did not run: its module did not, or the branch it sits in."""
    module_path, _, operations = base.partition(".source.")
    module = _envoy_at(root, module_path)
    name = spelled(module) if module is not None else module_path
    if not _ran(mediator, module_path):
        return f"{name} itself did not run (a block skipped, or a branch of its parent's forward not taken)"
    if not operations:
        return f"{name} did not run"
    compiled = _compiled(module)
    if compiled is None:
        return f"its operation {operations} did not run"
    first = compiled.names[0] if compiled.names else None
    if first is not None and not _ran(mediator, f"{module_path}.source.{first}"):
        return f"{name} was skipped, so none of its forward's operations ran"
    operation = operations.split(".source.")[0]
    branch = _branch(compiled.source, compiled.lines.get(operation))
    forward = f"{type(module._module).__name__}.forward"
    if branch is None:
        return f"the operation {operation} of {forward} it is read at was not reached (an early return, or a loop that ran no step)"
    return f"the operation {operation} of {forward} it is read at sits {branch}, which this call did not take"


def _envoy_at(root: Any, path: str) -> Any:
    node = root
    for part in path.split(".")[1:]:
        node = node.__dict__.get(part)
        if node is None:
            return None
    return node


def _compiled(module: Any) -> Any:
    try:
        return module.source.compiled
    except Exception:  # noqa: BLE001 - no Python source: nothing to point at
        return None


def _branch(source: str, line: int | None) -> str | None:
    """``under `if use_cache:``` for the innermost ``if`` of ``source`` holding ``line``, or None."""
    if line is None:
        return None
    found = None
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If):
            continue
        test = ast.unparse(node.test)
        # end_lineno is typed Optional, and ast.parse sets it on every statement
        for body, words in ((node.body, f"under `if {test}:`"), (node.orelse, f"in the else of `if {test}:`")):
            if (
                body
                and body[0].lineno <= line <= cast(int, body[-1].end_lineno)
                and (found is None or node.lineno > found[0])
            ):
                found = (node.lineno, words)
    return None if found is None else found[1]
