"""Patches of other libraries' internals: each installed where it is needed, and undone; none by importing nnterp.

A ``Patch`` replaces attributes of another library's modules or classes while
it is installed: as a context manager for the length of a call, or by an
explicit ``install()`` and ``uninstall()`` (``hold`` ties an install to the life
of an object, a model, and ``release`` ends it early). Installs are counted, so
nested and concurrent users share one, and the last ``uninstall`` puts back
exactly what was there (an attribute that was absent is deleted again); what
the replacements kept (their caches) goes with them. Each patch's docstring
names the upstream change that would delete it.

One module per patched library: ``nnsight``, ``transformers``, ``vllm``. A
leaf package keeps its own beside its code (``nnterp_recurrent._patches``,
``nnterp_vision._patches``), built on this class.
"""

from __future__ import annotations

import importlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

#: an attribute the owner did not have itself (absent, or inherited): deleted again on ``uninstall``
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
#: the instance-dict key under which ``hold`` keeps an object's held patches and their finalizer
HELD = "_nnterp_held_patches"


def owner_of(target: str) -> tuple[Any, str]:
    """The object and attribute name a target spells: ``"package.module:name"`` or ``"package.module:Class.name"``."""
    module, _, dotted = target.partition(":")
    *path, name = dotted.split(".")
    owner: Any = importlib.import_module(module)
    for part in path:
        owner = getattr(owner, part)
    return owner, name


class Patch:
    """Attributes of another library replaced while installed: ``with patch:``, or ``install()`` then ``uninstall()``.

    ``targets`` spell what is replaced (``owner_of``); ``replace`` is called at
    the first install with what each target held (``MISSING`` where the owner
    had none of its own) and returns the replacements, in order; a replacement
    that is the original leaves that target as it is. Use ``Patch.of`` to write
    one as a decorated function whose docstring is the patch's.
    """

    def __init__(self, targets: tuple[str, ...], replace: Callable[..., tuple], doc: str | None = None) -> None:
        self.targets = targets
        self.replace = replace
        self.__doc__ = doc
        self.count = 0
        self.saved: list[tuple[Any, str, Any]] = []
        #: ``(owner, attribute)`` of each target, resolved at the first install
        self.owners: list[tuple[Any, str]] | None = None
        self.lock = threading.RLock()

    @classmethod
    def of(cls, *targets: str) -> Callable[[Callable[..., Any]], Patch]:
        """Decorate ``replace(*originals)`` (returning one replacement for one target, else a tuple) into a ``Patch``."""

        def patch(replace: Callable[..., Any]) -> Patch:
            single = len(targets) == 1
            made = cls(targets, (lambda *found: (replace(*found),)) if single else replace, replace.__doc__)
            made.__name__ = replace.__name__  # type: ignore[attr-defined]
            made.__module__ = replace.__module__
            return made

        return patch

    @property
    def installed(self) -> bool:
        """Whether any install is outstanding."""
        return self.count > 0

    def install(self) -> None:
        """Replace the targets (the first install does it; later ones count)."""
        with self.lock:
            if self.count == 0:
                if self.owners is None:  # resolved once: a module and a class stay the objects they are
                    self.owners = [owner_of(target) for target in self.targets]
                owners = self.owners
                originals = [vars(owner).get(name, MISSING) for owner, name in owners]
                try:
                    for (owner, name), original, replacement in zip(owners, originals, self.replace(*originals)):
                        if replacement is not original:
                            self.saved.append((owner, name, original))
                            setattr(owner, name, replacement)
                except BaseException:
                    self._put_back()
                    raise
            self.count += 1

    def uninstall(self) -> None:
        """Undo one install; the last puts back exactly what the targets held (deleting what was absent)."""
        with self.lock:
            if self.count == 0:
                raise RuntimeError(f"{self!r} is not installed")
            self.count -= 1
            if self.count == 0:
                self._put_back()

    def _put_back(self) -> None:
        for owner, name, original in reversed(self.saved):
            if original is MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self.saved.clear()

    def __enter__(self) -> Patch:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def __repr__(self) -> str:
        return f"<patch {getattr(self, '__name__', '?')} of {', '.join(self.targets)}>"

    def __reduce__(self) -> tuple:
        # one patch a process, with a lock and what it replaced: a function pickled by value that names it (a trace
        # shipped with remote="local") takes it by its module-level name, the same patch where it lands
        return (_named, (self.__module__, self.__name__))  # type: ignore[attr-defined]


def _named(module: str, name: str) -> Patch:
    """The patch ``module.name``: how one is unpickled."""
    return getattr(importlib.import_module(module), name)


def hold(holder: Any, *patches: Patch) -> None:
    """Install ``patches`` for the life of ``holder`` (a model): undone when it is collected, or by ``release``.

    Holding a patch the holder already holds does nothing. The holder keeps the
    list in its instance dict (``HELD``), with the finalizer that undoes it.
    """
    state = vars(holder)
    held, _ = state.get(HELD) or ([], None)
    fresh = [patch for patch in patches if patch not in held]
    for patch in fresh:
        patch.install()
    held = held + fresh
    if HELD in state:
        state[HELD][1].detach()
    state[HELD] = (held, weakref.finalize(holder, _uninstall, list(held)))


def release(holder: Any) -> None:
    """Undo now what ``hold`` installed for ``holder``."""
    held, finalizer = vars(holder).pop(HELD, ([], None))
    if finalizer is not None and finalizer.detach() is not None:
        _uninstall(held)


def _uninstall(patches: list[Patch]) -> None:
    for patch in reversed(patches):
        patch.uninstall()
