"""Tracing mistakes brought from nnsight and TransformerLens, said in standard names with the rule and the fix.

nnsight reports these in its own terms, or far from the line at fault: a
``NameError`` after a trace for a value never saved, ``NameError`` for a value
another invoke has not bound yet, ``'140234954241632.grad.i0' was requested``
for gradients read in forward order, an error about its internals for a
trace inside a trace. ``StandardizedTransformer`` hands its run's failures to
``translated`` (the failure path only) and its run's workers to
``keep_unsaved`` at a successful exit (a few names per worker).
"""

from __future__ import annotations

import ast
import dis
import linecache
import re
from typing import Any, cast

import torch
from torch import Tensor

from ._gradients import FORM, SPELLING, TRACK
from .errors import (
    FrozenWeights,
    GradientOrder,
    InvokeBeforeBarrier,
    LoopCutShort,
    NestedTrace,
    OutsideTrace,
    ReadInBackward,
    TracingMistake,
    UnsavedValue,
)

NESTED = (
    "a trace was opened inside another trace of the same model: one trace runs the model once, and the "
    "model cannot run again while it is inside that run. Batch several prompts as invokes of one trace:\n"
    "    with model.trace() as tracer:\n"
    "        with tracer.invoke(prompt_a):\n"
    "            a = model.layers[0].layer_output.save()\n"
    "        with tracer.invoke(prompt_b):\n"
    "            b = model.layers[0].layer_output.save()\n"
    "or close the first trace before opening the next (two traces, one after the other)."
)


# -- values bound in a trace and not saved -----------------------------------------------


class Unsaved:
    """What a name a trace's block bound without ``.save()`` (or never bound) holds after it: every use raises.

    nnsight pushes back only saved values, so the name would be unbound (a
    ``NameError`` at the next line) or keep what it held before the trace. It
    holds no tensor; its repr says what it is, for debuggers and notebooks.
    """

    __slots__ = ("_error", "_message", "_variable")
    __hash__ = object.__hash__  # a dict key or set member is no use of the value

    def __init__(self, variable: str, error: type, message: str) -> None:
        self._variable = variable
        self._error = error
        self._message = message

    @classmethod
    def of(cls, variable: str, value: Any) -> Unsaved:
        """The name ``variable``, bound to ``value`` (a tensor, or a container holding some) and not saved."""
        if isinstance(value, Tensor):
            spelling = value.__dict__.get(SPELLING)
            what = spelling or "a tensor computed inside the trace"
            fix = f"{variable} = {f'model.{spelling}' if spelling else '...'}.save()"
        else:
            kind = "dict" if isinstance(value, dict) else "tuple" if isinstance(value, tuple) else "list"
            what = f"a {kind} of tensors"
            written = {"dict": "{...}", "tuple": "(...)", "list": "[...]"}[kind]
            fix = f"{variable} = nnsight.save({written})  # .save() on each element keeps the elements, not the {kind}"
        return cls(
            variable,
            UnsavedValue,
            f"{variable} was bound to {what} inside the trace without .save(), so it did not leave the trace: "
            f"a trace hands back only the values marked with .save(). Save it where it is bound:\n"
            f"    with model.trace(prompt):\n        {fix}",
        )

    @classmethod
    def cut_short(cls, variable: str) -> Unsaved:
        """The name ``variable``, which a block cut short by an open ``tracer.all()`` / ``tracer.iter[:]`` loop never reached."""
        return cls(
            variable,
            LoopCutShort,
            f"{variable} was never bound: its line comes after a `for ... in tracer.all():` (or tracer.iter[...]) "
            "loop, and such a loop ends its invoke when the model stops running, so the statements after it "
            "never run (nnsight only warns: '... was never reached'). Put them in an invoke of their own (one "
            "without input sees the whole batch):\n"
            "    with model.generate(max_new_tokens=n) as tracer:\n"
            "        with tracer.invoke(prompt):\n"
            "            for step in tracer.all():\n"
            "                ...\n"
            "        with tracer.invoke():\n"
            f"            {variable} = ....save()\n"
            "or bound the loop (tracer.iter[:n]) and make the model run that many steps (min_new_tokens=n).",
        )

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise self._error(self._message)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # a protocol probe (pickle, copy, numpy) is no use of the value
        self._refuse()

    def __repr__(self) -> str:
        return f"<{self._variable}: not handed back by the trace ({self._error.__name__})>"

    @classmethod
    def __torch_function__(cls, function: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        unsaved = next(arg for arg in _flat(args, kwargs) if isinstance(arg, Unsaved))
        unsaved._refuse()


def _flat(args: tuple, kwargs: dict | None) -> list:
    found: list = []
    for arg in (*args, *(kwargs or {}).values()):
        found.extend(arg if isinstance(arg, (list, tuple)) else [arg])
    return found


_USES = [
    "__str__",
    "__format__",
    "__bool__",
    "__len__",
    "__iter__",
    "__contains__",
    "__getitem__",
    "__setitem__",
    "__delitem__",
    "__call__",
    "__float__",
    "__int__",
    "__index__",
    "__complex__",
    "__array__",
    "__neg__",
    "__pos__",
    "__abs__",
    "__invert__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__matmul__",
    "__rmatmul__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pow__",
    "__rpow__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__lshift__",
    "__rshift__",
    "__iadd__",
    "__isub__",
    "__imul__",
    "__itruediv__",
]
for _use in _USES:
    setattr(Unsaved, _use, Unsaved._refuse)


def keep_unsaved(mediators: list, held: list[dict]) -> None:
    """Bind an ``Unsaved`` to every name a worker bound to a tensor and did not save, for the outermost trace to push back.

    ``held`` is what each worker's names held before the run: a name still
    holding that object was not bound in the trace (a list made before it and
    appended to inside keeps its elements), so it passes back as it is.

    A worker still waiting when the run ended was cut short by an open
    ``tracer.all()`` loop (any other wait raises): the names its block binds
    after the loop are bound to ``Unsaved.cut_short`` too.
    """
    from nnsight.tracing.tracer import _local, _saves

    if getattr(_local, "depth", 0) != 1:
        return  # an inner trace (a session's) pushes every name: its values still flow
    saves = _saves()
    for mediator, before in zip(mediators, held):
        if mediator.copy:
            continue  # a registered edit: replayed on every trace, its names are not the user's
        scope = mediator.lcls
        for name in scope.written:
            value = dict.get(scope, name)
            if id(value) not in saves and before.get(name, scope) is not value and _holds_tensors(value):
                _bind(scope, saves, name, Unsaved.of(name, value))
        if mediator.pending is not None:
            for name in _stored(mediator.code) - scope.written:
                _bind(scope, saves, name, Unsaved.cut_short(name))


def _holds_tensors(value: Any) -> bool:
    """A tensor, or a list, tuple or dict with a tensor among its items (one level down)."""
    if isinstance(value, Tensor):
        return True
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    return any(isinstance(item, Tensor) for item in value)


def _bind(scope: Any, saves: set, name: str, unsaved: Unsaved) -> None:
    dict.__setitem__(scope, name, unsaved)
    scope.written.add(name)
    saves.add(id(unsaved))


# -- a failed run, in the user's words -------------------------------------------------


def translated(error: BaseException, mediators: list, model: Any) -> BaseException | None:
    """The error to raise in place of ``error``, which ended a run of ``model`` by these workers, or None to keep it."""
    if isinstance(error, TracingMistake):
        return None
    if type(error) is NotImplementedError and "does not require grad" in str(error):
        return _frozen(model)
    if isinstance(error, NameError):
        return _before_barrier(error, mediators)
    if type(error).__name__ == "OutOfOrderError":
        return _gradient_order(error, mediators)
    return None


def _frozen(model: Any) -> BaseException | None:
    """A backward pass under gradient tracking that nothing reaches, because no weight requires grad."""
    if not torch.is_grad_enabled() or any(parameter.requires_grad for parameter in model._module.parameters()):
        return None  # under no_grad, or a tensor of the user's own: nnsight's words hold
    return FrozenWeights(
        "the backward pass has nothing to run through: this model's weights are frozen (requires_grad_(False), as "
        "NDIF's servers load every model), so no value of the forward is tracked. To take gradients, "
        f"{TRACK}; every later value is then tracked as with trainable weights:\n"
        "with model.trace(prompt):\n"
        "    model.layers[0].layer_input.requires_grad_(True)\n"
        "    value = model.layers[1].layer_output\n"
        "    metric = model.logits[:, -1].sum()\n"
        "    with metric.backward():\n"
        "        gradient = value.grad.save()"
    )


def _before_barrier(error: NameError, mediators: list) -> BaseException | None:
    """A name another invoke binds, read before that invoke has bound it."""
    name = getattr(error, "name", None)
    if name is None or len(mediators) < 2:
        return None
    frames = _frames(error)
    reader = next((index for index, mediator in enumerate(mediators) if mediator.code in frames), None)
    binder = next(
        (index for index, mediator in enumerate(mediators) if index != reader and name in _stored(mediator.code)), None
    )
    if reader is None or binder is None:
        return None
    bound = _assigned(mediators[binder].node, name) or "..."
    frame, line = _innermost(error, mediators)
    use = linecache.getline(frame.f_code.co_filename, line).strip() if frame is not None else ""
    blocks = {binder: [f"{name} = {bound}", "barrier()"], reader: ["barrier()", use or f"... {name} ..."]}
    fix = ["    with model.trace() as tracer:", "        barrier = tracer.barrier(2)"]
    for index in sorted(blocks):
        fix.append(f"        with tracer.invoke(prompt_{index + 1}):")
        fix += [f"            {statement}" for statement in blocks[index]]
    return InvokeBeforeBarrier(
        f"{name} is bound in invoke {binder + 1} (to {bound}) and read in invoke {reader + 1} before that invoke "
        "bound it: invokes run one after another on separate workers, each pausing where it waits for the model, "
        "so a value one invoke binds is visible in another only after a barrier both reach. Make the barrier "
        "before the invokes and call it in both, after the binding and before the use:\n" + "\n".join(fix)
    )


def _frames(error: BaseException) -> list:
    """The code objects of the frames the error passed through, innermost last."""
    trace = getattr(error, "__intervention_tb__", None) or error.__traceback__
    codes = []
    while trace is not None:
        codes.append(trace.tb_frame.f_code)
        trace = trace.tb_next
    return codes


def _stored(code: Any) -> set[str]:
    return {
        instruction.argval
        for instruction in dis.get_instructions(code)
        if instruction.opname in ("STORE_NAME", "STORE_GLOBAL")
    }


def _assigned(node: Any, name: str) -> str | None:
    """What ``name`` is assigned from in a ``with`` block's body, as the user wrote it."""
    for statement in ast.walk(ast.Module(body=list(getattr(node, "body", [])), type_ignores=[])):
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in statement.targets
        ):
            return ast.unparse(statement.value)
    return None


_GRAD = re.compile(r"'(\d+)\.grad\.i\d+'")


def _gradient_order(error: BaseException, mediators: list) -> BaseException | None:
    """``.grad`` of a value asked for after the gradient of a value the forward computed before it."""
    found = _GRAD.search(str(error))
    if found is None:
        return None
    wanted = int(found.group(1))
    frame, line = _innermost(error, mediators)
    scopes = [frame.f_locals] if frame is not None else []
    scopes += [mediator.lcls for mediator in mediators]
    bound = _by_id(scopes, wanted)
    if bound is None:
        return None
    name, tensor = bound
    later = _spelled(name, tensor)
    before = _grad_read_before(frame, line) if frame is not None else None
    after = ""
    if before is not None:
        after = f" after {_spelled(before, _lookup(scopes, before))}"
    first, then = name, before or "earlier"
    return GradientOrder(
        f"{later} was read{after}, but inside `with metric.backward():` gradients arrive in reverse (backward) "
        f"order, from the value the forward computed last to the first, so {name}'s gradient had already gone by. "
        f"Read the later value's .grad first:\n"
        f"    with metric.backward():\n"
        f"        {first}_grad = {first}.grad.save()\n"
        f"        {then}_grad = {then}.grad.save()"
    )


def _innermost(error: BaseException, mediators: list) -> tuple[Any, int]:
    """The innermost frame the error passed through in the file the trace was written in (the user's line), and its line.

    A library frame deeper down (a patched ``Tensor.grad`` getter with a
    ``tensor`` argument) holds none of the user's names.
    """
    trace = getattr(error, "__intervention_tb__", None) or error.__traceback__
    files = {mediator.code.co_filename for mediator in mediators}
    last = user = None
    while trace is not None:
        last, trace = trace, trace.tb_next
        if last.tb_frame.f_code.co_filename in files:
            user = last
    found = user or last
    return (None, 0) if found is None else (found.tb_frame, found.tb_lineno)


def _by_id(scopes: list, wanted: int) -> tuple[str, Tensor] | None:
    for scope in scopes:
        for name, value in dict.items(scope):
            if id(value) == wanted and isinstance(value, Tensor):
                return name, value
    return None


def _lookup(scopes: list, name: str) -> Any:
    for scope in scopes:
        if name in dict.keys(scope):
            return dict.get(scope, name)
    return None


def _spelled(name: str, tensor: Any) -> str:
    """``b.grad (layers[1].layer_output)`` where nnterp served the tensor bound to ``name``, else ``b.grad``."""
    value = tensor.__dict__.get(SPELLING) if isinstance(tensor, Tensor) else None
    return f"{name}.grad" if value is None else f"{name}.grad ({value})"


def _grad_read_before(frame: Any, line: int) -> str | None:
    """The name whose ``.grad`` the backward block reads last before ``line``, from the source."""
    source = "".join(linecache.getlines(frame.f_code.co_filename))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    block = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.With) and node.body and node.body[0].lineno <= line <= cast(int, node.end_lineno)
        ):  # ast.parse sets it
            called = node.items[0].context_expr
            if (
                isinstance(called, ast.Call)
                and isinstance(called.func, ast.Attribute)
                and called.func.attr == "backward"
                and (block is None or node.lineno > block.lineno)
            ):
                block = node
    if block is None:
        return None
    reads = [
        (node, node.value.id)
        for statement in block.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Attribute)
        and node.attr == "grad"
        and isinstance(node.value, ast.Name)
        and node.lineno < line
    ]
    return max(reads, key=lambda read: (read[0].lineno, read[0].col_offset))[1] if reads else None


# -- standard values where no forward serves them -------------------------------------


def outside_trace(spelling: str, verb: str) -> OutsideTrace:
    """The error for a standard value read (or written) outside any trace."""
    if verb == "read":
        fix = f"Read it inside the trace and .save() it to use it after:\n    with model.trace(prompt):\n        value = model.{spelling}.save()\n    value.shape"
    else:
        fix = f"Assign it inside the trace:\n    with model.trace(prompt):\n        model.{spelling} = replacement"
    return OutsideTrace(
        f"{spelling} was {verb} outside a trace: a standard value exists only while the forward runs, inside "
        f"`with model.trace(...):` (or model.generate). {fix}"
    )


def read_in_backward(spelling: str, verb: str) -> ReadInBackward:
    """The error for a standard value first read inside ``with metric.backward():``."""
    return ReadInBackward(
        f"{spelling} was {verb} inside `with metric.backward():`, where only gradients arrive: the forward that "
        f"computes it is over by then. Read it (and keep it in a variable) in the forward, before backward(), "
        f"and read only its .grad inside:\n" + FORM.format(value=spelling)
    )


def nested_trace() -> NestedTrace:
    return NestedTrace(NESTED)
