"""Which kernels a family's recurrent mixers run: bound process-wide in the dispatchers of its modeling module.

transformers calls each kernel through a name in the modeling module
(``torch_chunk_gated_delta_rule``), bound at import to a dispatcher that
calls ``implementation``: a compiled package's kernel where one is installed,
else a pure-torch function. Only the pure-torch functions have Python source
to read values inside, and only the token-by-token one materializes the state
after every token, so routing is the user's choice, like eager attention.

Routing sets what the dispatcher calls (its ``implementation`` cell), not the
module's name: a forward nnsight has already instrumented runs on a copy of
the module's globals, but shares the dispatcher, so the routing reaches it too.
The patch itself, and what undoes it, is ``nnterp_recurrent._patches``
(``bind``, ``unbind``); ``"default"`` puts back exactly what was replaced.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nnterp.family import Family

from ._patches import bind, unbind
from ._patches import calls as calls  # what a mixer asks of its dispatchers (components.mixer)
from ._patches import dispatcher as dispatcher

if TYPE_CHECKING:  # imported where used: the components import this module
    from .components.mixer import RecurrentMixer

MODES = ("torch", "default")


def modeling_modules(family: Any) -> list[ModuleType]:
    """The transformers modeling modules a family's mixers live in (its ``modeling``), or the module itself."""
    from nnterp.registry import family_for

    from .family import RecurrentFamily

    if isinstance(family, Family) and not isinstance(family, RecurrentFamily) and family.text_family:
        family = family_for(family.text_family)  # a wrapper's mixers are its text family's
    if isinstance(family, RecurrentFamily) and family.modeling:
        return [importlib.import_module(name) for name in family.modeling]
    if isinstance(family, ModuleType) and family.__name__.startswith("transformers.models."):
        return [family]
    raise TypeError(
        f"{family!r} is neither a RecurrentFamily naming its modeling modules nor a transformers modeling module; "
        "pass model.family"
    )


def mixer_classes(family: Family) -> list[type[RecurrentMixer]]:
    """The recurrent mixer components a family wraps its modules in (its ``envoys`` values)."""
    from .components.mixer import RecurrentMixer

    found = [
        cls
        for cls in family.with_text_family().envoys.values()
        if isinstance(cls, type) and issubclass(cls, RecurrentMixer)
    ]
    if not found:
        raise TypeError(f"the {family.name} family wraps no module in a recurrent mixer; nothing to route")
    return found


def route_kernels(family: Any, mode: str) -> None:
    """Bind a family's recurrent kernels, process-wide: ``"torch"`` for the pure-torch ones, ``"default"`` to restore.

    ``"torch"`` binds each kernel name in the family's modeling modules to
    transformers' pure-torch function: the slower path, the only one with
    Python source to read values inside. Where the token-by-token kernel keeps
    the state after every token, the prompt's kernel name is bound to it too,
    so ``state``, ``states``, ``state_after`` and ``set_state_after`` read and
    write the state at any position. It applies to every model of the family;
    call it before tracing. ``family`` is ``model.family`` (a ``RecurrentFamily``)
    or a transformers modeling module.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(map(repr, MODES))}")
    modules = modeling_modules(family)
    classes = mixer_classes(family) if isinstance(family, Family) else None
    for module in modules:
        for cls in classes if classes is not None else _classes_for(module):
            if all(hasattr(module, name) for name in cls.kernel_names()):
                route_module(module, cls, mode)


def route_module(module: ModuleType, cls: type[RecurrentMixer], mode: str) -> None:
    """Route the kernels mixer class ``cls`` names in one modeling module."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(map(repr, MODES))}")
    if mode == "default":
        unbind(module, cls.kernel_names())
    else:
        bind(module, cls.torch_kernels(module))


def _classes_for(module: ModuleType) -> list[type[RecurrentMixer]]:
    # a modeling module passed directly: every registered mixer component whose kernels it names
    from .components.mixer import RecurrentMixer

    def walk(cls: type[RecurrentMixer]) -> list[type[RecurrentMixer]]:
        return [cls] + [sub for child in cls.__subclasses__() for sub in walk(child)]

    return [
        cls for cls in walk(RecurrentMixer) if cls.CHUNK_KERNEL and all(hasattr(module, n) for n in cls.kernel_names())
    ]


def route_delta_rule(family: Any, rule: str) -> None:
    """``route_kernels`` for a gated DeltaNet, in its words: ``"recurrent"`` (token by token) or ``"chunked"``."""
    modes = {"recurrent": "torch", "chunked": "default"}
    if rule not in modes:
        raise ValueError(f"rule {rule!r}: 'recurrent' or 'chunked'")
    route_kernels(family, modes[rule])
