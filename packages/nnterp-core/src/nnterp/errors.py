"""The errors nnterp raises where a standard value cannot be had."""

from typing import Any

from nnsight.intervention.interleaver import OutOfOrderError as _NnsightOutOfOrderError
from nnsight.intervention.source import SourceNotAvailable as _NnsightSourceNotAvailable


class Unavailable(RuntimeError):
    """A standard value this checkpoint does not have, and why.

    Raised on access, before anything runs, so a wrong assumption fails at the
    line that makes it. ``support()`` reports the same reasons without raising.
    ``where`` is an envoy (spelled as the user reaches it: ``layers[0].mlp``) or a name.
    """

    #: the value's name; typed as AttributeError's own field, which the subclasses that are one share
    name: str | None

    def __init__(self, where: Any, name: str, reason: str) -> None:
        if not isinstance(where, str):
            from ._spelling import spelled_cached  # an envoy: named as the user reaches it, layers[0].mlp

            where = spelled_cached(where)
        self.where = where
        self.name = name
        self.reason = reason
        super().__init__(f"{where}.{name} is unavailable: {reason}")


class MissingModule(Unavailable, AttributeError):
    """A block without one of the standard sublayers (a hybrid's attention block has no ``linear_attn``).

    An ``AttributeError`` too, so ``hasattr(block, "linear_attn")`` still answers False.
    """


class OtherComponent(Unavailable, AttributeError):
    """A standard value of another kind of component: router values on a dense MLP, state values on an attention.

    ``support()`` knows the reason (this MLP is dense, this mixer is softmax
    attention); an ``AttributeError`` too, so ``hasattr(mlp, "router_logits")``
    still answers False.
    """


class UnknownValue(AttributeError):
    """A name that is no standard value, module or attribute of this component; the message suggests the nearest.

    Worked out only when the message is read: ``hasattr`` probes never pay for it.
    """

    def __init__(self, envoy: Any, name: str) -> None:
        super().__init__(envoy, name)
        self.name = name

    def __str__(self) -> str:
        import difflib

        from ._spelling import spelled

        envoy, name = self.args
        values = list(envoy.values()) if hasattr(type(envoy), "values") else []
        modules = [key for key, child in vars(envoy).items() if hasattr(child, "_module") and not key.startswith("_")]
        near = difflib.get_close_matches(name, values + modules, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(near)}?" if near else "."
        listing = f" Its standard values: {', '.join(values)}." if values else ""
        return f"{spelled(envoy)} ({type(envoy).__name__}) has no value, module or attribute {name!r}{hint}{listing}"


class WriteMismatch(ValueError):
    """An assignment to a standard value whose tensor does not fit the value's layout (rank, sizes, dtype or device).

    Raised at the assignment, before the model continues with it; the message
    names the value, the expected layout with its sizes, and what was given.
    """


class OutOfOrder(_NnsightOutOfOrderError):
    """A standard value read or written after the forward had already passed it.

    Names both values in the user's spelling and states the order rule. A
    subclass of nnsight's ``OutOfOrderError``, which nnsight's own loops catch.
    """


class NeverRan(OutOfOrder):
    """A standard value whose module or operation did not run on this call (a branch not taken, a skipped block)."""


class GradientOutsideBackward(RuntimeError):
    """``.grad`` read on a value where no backward pass will reach it: outside ``with loss.backward():``."""


class InvalidPrompt(ValueError):
    """A prompt the model cannot run (empty, mixed strings and ids, ids outside the vocabulary, too long), refused before the forward."""


class InvalidArgument(ValueError):
    """A toolkit argument outside what the function takes, refused before any model runs.

    The message names the function and the argument as the caller wrote them,
    what was given, the range or form expected, and the fix.
    """

    def __init__(self, function: str, argument: str, given: Any, expected: str, fix: str = "") -> None:
        self.function = function
        self.argument = argument
        self.given = given
        shown = _shown(given)
        super().__init__(f"{function}({argument}={shown}): {expected}" + (f"; {fix}" if fix else ""))


def _shown(given: Any) -> str:
    """``given`` as an argument's value reads in a message: a tensor by its shape and dtype, anything else by a short repr."""
    import torch

    if isinstance(given, torch.Tensor) and given.numel() > 8:
        return f"<tensor of shape {list(given.shape)}, {str(given.dtype).removeprefix('torch.')}>"
    shown = repr(given)
    return shown if len(shown) <= 80 else shown[:77] + "..."


class TracingMistake(RuntimeError):
    """A use of a trace that breaks one of its rules (save before leaving, barriers between invokes, no toolkit call
    inside a trace, ``.grad`` reads in backward order), named in the user's terms with the rule and the fix."""


class ToolkitInsideTrace(TracingMistake):
    """A toolkit function that runs its own forwards, called inside an open trace; or one that edits a trace, called outside."""


class UnsavedValue(TracingMistake, NameError):
    """A name bound to a tensor inside a trace without ``.save()``, used after the trace: only saved values leave it.

    A ``NameError`` too, which is what the use raised before nnterp said why.
    """


class LoopCutShort(TracingMistake, NameError):
    """A name bound after an open ``tracer.all()`` / ``tracer.iter[:]`` loop, which ends its invoke: the line never ran."""


class NestedTrace(TracingMistake, ValueError):
    """A trace opened inside another trace of the same model: one runs at a time (invokes batch several prompts)."""


class InvokeBeforeBarrier(TracingMistake, NameError):
    """A name one invoke binds, read in another before a barrier both reach (a ``NameError`` in nnsight's words)."""


class GradientOrder(TracingMistake, OutOfOrder):
    """``.grad`` of two values read inside ``backward()`` in forward order: gradients arrive last value first."""


class FrozenWeights(TracingMistake, NotImplementedError):
    """A backward pass on a model whose weights are frozen (NDIF's servers load every model so) with nothing made to
    require grad: no value of the forward is tracked (nnsight's ``NotImplementedError``)."""


class ReadInBackward(TracingMistake, OutOfOrder):
    """A standard value first read inside ``with metric.backward():``, after the forward that computes it is over."""


class OutsideTrace(TracingMistake, ValueError):
    """A standard value read or written outside ``with model.trace(...):``, where there is no forward to serve it."""


class CheckpointNotFound(FileNotFoundError):
    """A checkpoint path that is neither a saved checkpoint's directory nor a plausible hub id."""


class DeviceMapInvalid(ValueError):
    """A ``device_map`` the model cannot run from: transformers' pipeline takes the inputs' device from its first entry, which is ``"disk"``."""


class SourceNotAvailable(_NnsightSourceNotAvailable):
    """A value pinned to an operation inside a forward that the forward no longer has.

    Names the value, the path it pinned and the operations the forward has now,
    which is what a transformers release that renamed the call needs to be fixed
    (see the upgrade procedure in docs/transformers-compatibility.md). A subclass
    of nnsight's own, so code that catches that one catches this one.
    """

    def __init__(self, value: str, path: str, operation: str, available: tuple[str, ...]) -> None:
        self.value = value
        self.path = path
        self.operation = operation
        self.available = available
        listing = ", ".join(available) or "(none)"
        super().__init__(
            f"{value} is pinned to {path!r}, but the forward has no operation {operation!r}; "
            f"the operations it has now: {listing}"
        )


class FamilyNotFound(LookupError):
    """No installed family serves a model type; the message says what to install or write."""


class FamilyMismatch(LookupError):
    """A family whose names do not fit the model it was given: the message names what is missing."""


class UnprovenFamily(UserWarning):
    """A load serves a family the kit never proved on this model or this release: an inferred family, a
    transformers release outside the proven series. The proof at load ran instead; the warning says what it found."""


class RemoteEnvironmentError(RuntimeError):
    """A remote trace nnterp did not send: the server lacks the nnterp packages it names, has other versions, or did not answer ``/env``.

    The message names the server's and this client's Python, nnsight and nnterp versions and what to install or where to run.
    """
