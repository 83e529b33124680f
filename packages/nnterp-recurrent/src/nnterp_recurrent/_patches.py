"""nnterp-recurrent's patches of transformers' recurrent modeling modules: each installed where it is needed, and undone.

Two, both on the module a family's mixers live in (``RecurrentFamily.modeling``):

- the kernel a dispatcher calls (``bind``, by ``route_kernels`` and a mixer's
  ``keeping_states``; ``route_kernels(family, "default")`` undoes it);
- a kernel name bound back to the function a ``kernels`` function module
  calls (``see_through``, at a mixer's build; ``restore`` undoes it).

Neither is installed by importing a package; each records what it replaced
and puts exactly that back, forgetting the record.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

# -- the kernel a dispatcher calls -----------------------------------------------------------------------------------

#: the closure cell a transformers kernel dispatcher calls
IMPLEMENTATION = "implementation"
#: what each bound dispatcher called before ``bind``, by (modeling module, name): what ``unbind`` puts back
ORIGINALS: dict[tuple[str, str], Any] = {}


def dispatcher(found: Any) -> Any:
    """The transformers dispatcher behind a kernel name of a modeling module: itself, or the function a ``kernels``
    function module calls (where ``see_through`` has not rebound the name yet)."""
    return stands_for(found) or found


def _cell(found: Any) -> Any:
    dispatcher_ = dispatcher(found)
    code = getattr(dispatcher_, "__code__", None)
    if code is None or IMPLEMENTATION not in code.co_freevars:
        raise TypeError(
            f"{getattr(dispatcher_, '__qualname__', dispatcher_)!r} is not a transformers kernel dispatcher "
            f"(no {IMPLEMENTATION!r} it calls); this transformers release routes kernels another way"
        )
    return dispatcher_.__closure__[code.co_freevars.index(IMPLEMENTATION)]


def calls(module: ModuleType, name: str) -> Any:
    """The function the dispatcher ``module.name`` calls now."""
    return _cell(getattr(module, name)).cell_contents


def original(module: ModuleType, name: str) -> Any:
    """What the dispatcher ``module.name`` called before any ``bind``."""
    return ORIGINALS.get((module.__name__, name), calls(module, name))


def bind(module: ModuleType, bindings: dict[str, Any]) -> None:
    """Make each dispatcher ``module.name`` call ``function`` (its ``implementation`` cell), remembering what it called.

    transformers calls each recurrent kernel through a name of the modeling
    module bound at import to a dispatcher, which calls a compiled package's
    kernel where one is installed, else a pure-torch function; only the
    pure-torch ones have Python source to read values inside. The cell is
    set, not the module's name: a forward nnsight has already instrumented
    runs on a copy of the module's globals, but shares the dispatcher.
    Process-wide until ``unbind``. Delete it when transformers chooses a
    recurrent kernel through a public setting read at each call (as
    ``attn_implementation`` does for attention), which routing would set instead.
    """
    for name, function in bindings.items():
        ORIGINALS.setdefault((module.__name__, name), calls(module, name))
        _cell(getattr(module, name)).cell_contents = function


def unbind(module: ModuleType, names: tuple[str, ...] | list[str]) -> None:
    """Make each dispatcher ``module.name`` call what it called before ``bind`` again, and forget the record."""
    for name in names:
        found = ORIGINALS.pop((module.__name__, name), None)
        if found is not None:
            _cell(getattr(module, name)).cell_contents = found


# -- a kernel name seen through the ``kernels`` library's function module ---------------------------------------------

#: the closure cell of the ``kernels`` library's function module (``Func.forward``) holding the function it stands for
HUB_FUNCTION = "func"
#: each name ``see_through`` rebound, with the function module it held: what ``restore`` binds back
SEEN_THROUGH: dict[tuple[str, str], tuple[ModuleType, Any]] = {}


def stands_for(found: Any) -> Any:
    """The function a ``kernels`` function module calls (``Func.forward``'s ``func``); None for anything else."""
    forward: Any = getattr(type(found), "forward", None)
    code = getattr(forward, "__code__", None)
    if isinstance(found, torch.nn.Module) and code is not None and HUB_FUNCTION in code.co_freevars:
        return forward.__closure__[code.co_freevars.index(HUB_FUNCTION)].cell_contents
    return None


def see_through(module: ModuleType) -> list[str]:
    """Bind each name of ``module`` that holds a ``kernels`` function module to the function it calls; the names rebound.

    transformers' ``use_kernel_forward_from_hub`` makes each kernel function
    of a modeling module a ``Func`` module, which nnsight cannot drill into
    (``.source`` raises ``SourceNotAvailable``). Installed when a recurrent
    mixer is built, before nnsight instruments the forward that calls it;
    process-wide until ``restore``. Delete it when ``kernels`` keeps the
    function itself at the module's name (wrapping it only when ``kernelize``
    selects a hub kernel), or nnsight drills into a module's ``forward`` from
    the call site.
    """
    rebound = []
    for name, found in list(vars(module).items()):
        function = stands_for(found)
        if function is not None:
            SEEN_THROUGH.setdefault((module.__name__, name), (module, found))
            setattr(module, name, function)
            rebound.append(name)
    return rebound


def restore(module: ModuleType | None = None) -> None:
    """Bind each name ``see_through`` rebound (in ``module``, or in every module) back to its ``kernels`` function
    module, and forget those records: a model built before keeps working only while its module's names stay rebound."""
    for key, (owner, found) in list(SEEN_THROUGH.items()):
        if module is None or owner is module:
            setattr(owner, key[1], found)
            del SEEN_THROUGH[key]
