"""The errors nnterp raises where a standard value cannot be had."""

from nnsight.intervention.source import SourceNotAvailable as _NnsightSourceNotAvailable


class Unavailable(RuntimeError):
    """A standard value this checkpoint does not have, and why.

    Raised on access, before anything runs, so a wrong assumption fails at the
    line that makes it. ``support()`` reports the same reasons without raising.
    """

    def __init__(self, where: str, name: str, reason: str) -> None:
        self.where = where
        self.name = name
        self.reason = reason
        super().__init__(f"{where}.{name} is unavailable: {reason}")


class MissingModule(Unavailable, AttributeError):
    """A block without one of the standard sublayers (a hybrid's attention block has no ``linear_attn``).

    An ``AttributeError`` too, so ``hasattr(block, "linear_attn")`` still answers False.
    """


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
