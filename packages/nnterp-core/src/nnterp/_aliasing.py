"""nnsight's aliasing, made cheaper while a model is built: the same answers, fewer recomputed.

Building the envoy tree with a family's ``rename`` and ``envoys`` maps is most
of what a construction costs over plain nnsight (benchmarks/README.md), in
three functions of ``nnsight.intervention.aliasing``:

- ``spellings``: nnsight chooses each module's envoy class by matching every
  spelling of its path under the ``rename`` aliases against the ``envoys``
  keys, and recomputes the spellings of every ancestor for every module. They
  are a pure function of the rename map, the path and (for a class key) the
  module's type, so for the length of one construction they are kept.
- ``named``: ``bind`` asks every envoy for every ``rename`` key, and on all
  but one envoy in ten the key's first component is no attribute there; each
  such miss is a failed ``getattr`` through the envoy's ``__getattr__`` and
  the module's, several exceptions deep. Where the miss is certain from the
  envoy's and the module's namespaces (no instance entry, no class attribute,
  a ``__getattr__`` known to raise ``AttributeError`` for a name the module
  lacks, and nothing that ``__getattr__`` would record), the answer, no match,
  is given without the ``getattr``; anything else goes to nnsight's function.
- ``path_ends_with``: a key without ``*`` ends a path component-wise exactly
  when the path is the key or ends with ``"." + key``.

And the envoy class nnsight resolves for each module
(``Envoy._resolve_envoy_class``) is a pure function of the two maps' content,
the path and the module's type, so it is kept across constructions, by the
maps' content: a second model of the same family resolves no path again.

Outside a construction nnsight's own functions run, untouched; an upstream
version of each belongs in nnsight.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
from nnsight import Envoy
from nnsight.intervention import aliasing

_SPELLINGS = aliasing.spellings
_NAMED = aliasing.named
_ENDS_WITH = aliasing.path_ends_with
_RESOLVE = Envoy._resolve_envoy_class

#: the envoy class each (path, module type) resolved to, by the content of the (rename, envoys) maps: the same family
#: builds the same tree, so a second construction of it resolves no path again
_RESOLVED: dict[tuple, dict[tuple[str, type], type]] = {}
#: how many (rename, envoys) maps are kept; past it the table starts afresh
_KEPT_MAPS = 64


def _content(rename: Any, envoys: Any) -> tuple | None:
    """A hashable key for what resolving an envoy class reads off the two maps, in their order; None where it has none."""
    if not isinstance(envoys, dict) or not isinstance(rename, (dict, type(None))):
        return None
    key = (
        tuple((name, tuple(aliases) if isinstance(aliases, list) else aliases) for name, aliases in (rename or {}).items()),
        tuple(envoys.items()),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _miss_is_certain(envoy_type: type) -> bool:
    """Whether a name that is in no namespace of an envoy of this type, nor of its module, is an ``AttributeError`` with no side effect."""
    from .components.layer import Layer
    from .components.standard import Standard

    if any("__getattribute__" in vars(cls) for cls in envoy_type.__mro__[:-1]):
        return False
    # Envoy's falls through to the module; Standard's and Layer's then raise an AttributeError of their own
    # (UnknownValue, which works its message out only when read), except for the names guarded in _certain_miss
    return envoy_type.__getattr__ in (Envoy.__getattr__, Standard.__getattr__, Layer.__getattr__)


def _plain_module(module_type: type) -> bool:
    """Whether attribute lookup on a module of this type is torch's own: its namespaces, then parameters, buffers, submodules."""
    return module_type.__getattr__ is torch.nn.Module.__getattr__ and not any(
        "__getattribute__" in vars(cls) for cls in module_type.__mro__[:-1]
    )


@contextmanager
def aliasing_kept() -> Iterator[None]:
    """Within it, nnsight's ``spellings``, ``named``, ``path_ends_with`` and ``_resolve_envoy_class`` give their answers for less."""
    if aliasing.spellings is not _SPELLINGS:  # an outer construction keeps them already
        yield
        return
    from .components.layer import Layer
    from .components.standard import VALUE_NAMES

    kept: dict[tuple, list[str]] = {}
    typed: dict[int, bool] = {}
    # by (envoy type, module type, name): whether neither class has the name and a miss there is an AttributeError alone
    by_types: dict[tuple[type, type, str], bool] = {}
    keys: dict[str, tuple[str, bool, list[str]]] = {}

    def spellings(rename: dict | None, path: str, module: Any = None) -> list[str]:
        by_type = typed.get(id(rename))
        if by_type is None:
            by_type = typed[id(rename)] = any(isinstance(key, type) for key in (rename or {}))
        key = (id(rename), path, type(module) if by_type else None)
        found = kept.get(key)
        if found is None:
            found = kept[key] = _SPELLINGS(rename, path, module)
        return list(found)

    def types_allow(kind: type, module_type: type, name: str) -> bool:
        if name == "*" or name.startswith("_") or name in VALUE_NAMES:
            return False
        # a Layer's sublayer names raise MissingModule, whose message names the block through a cache
        if issubclass(kind, Layer) and (name in kind.SUBLAYERS or name == "self_attn"):
            return False
        return (
            _miss_is_certain(kind)
            and _plain_module(module_type)
            and not any(name in vars(cls) for cls in kind.__mro__)
            and not any(name in vars(cls) for cls in module_type.__mro__)
        )

    def certain_miss(envoy: Any, name: str) -> bool:
        """Whether ``getattr(envoy, name)`` raises ``AttributeError`` and does nothing else, known without calling it."""
        state = envoy.__dict__
        module = state.get("_module")
        if module is None or name in state or "_nnterp_error" in state:
            return False
        types = (type(envoy), type(module), name)
        allowed = by_types.get(types)
        if allowed is None:
            allowed = by_types[types] = types_allow(*types)
        if not allowed:
            return False
        held = module.__dict__
        parameters, buffers, modules = held.get("_parameters"), held.get("_buffers"), held.get("_modules")
        return (
            name not in held
            and isinstance(parameters, dict) and isinstance(buffers, dict) and isinstance(modules, dict)
            and name not in parameters and name not in buffers and name not in modules
        )

    def named(envoy: Any, key: str | type) -> list:
        # a key whose first component is certainly no attribute of the envoy names nothing from it
        if isinstance(key, str) and certain_miss(envoy, key.lstrip(".").split(".")[0]):
            return []
        return _NAMED(envoy, key)

    def path_ends_with(path: str, key: str) -> bool:
        compiled = keys.get(key)
        if compiled is None:
            bare = key.removeprefix(".")
            compiled = keys[key] = (bare, "*" in bare, bare.split("."))
        bare, starred, key_parts = compiled
        if not starred:
            # component-wise without splitting: the path is the key, or ends with it after a separator
            return path == bare or path.endswith(f".{bare}")
        last = key_parts[-1]
        if last != "*" and not path.endswith(last):  # the path's last component cannot be the key's
            return False
        parts = path.split(".")
        return len(key_parts) <= len(parts) and all(k in ("*", p) for p, k in zip(parts[-len(key_parts) :], key_parts))

    contents: dict[tuple[int, int], tuple | None] = {}

    def resolve(envoy: Any, module: Any, path: str) -> type:
        # a pure function of the two maps' content, the path and the module's type (its MRO, for class keys)
        ids = (id(envoy._rename), id(envoy._envoys))
        if ids not in contents:
            contents[ids] = _content(envoy._rename, envoy._envoys)
        content = contents[ids]
        if content is None:
            return _RESOLVE(envoy, module, path)
        table = _RESOLVED.get(content)
        if table is None:
            if len(_RESOLVED) >= _KEPT_MAPS:
                _RESOLVED.clear()
            table = _RESOLVED[content] = {}
        found = table.get((path, type(module)))
        if found is None:
            found = table[(path, type(module))] = _RESOLVE(envoy, module, path)
        return found

    aliasing.spellings, aliasing.named, aliasing.path_ends_with = spellings, named, path_ends_with
    Envoy._resolve_envoy_class = resolve
    try:
        yield
    finally:
        aliasing.spellings, aliasing.named, aliasing.path_ends_with = _SPELLINGS, _NAMED, _ENDS_WITH
        Envoy._resolve_envoy_class = _RESOLVE
