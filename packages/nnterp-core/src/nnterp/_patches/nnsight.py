"""nnterp's patches of nnsight 0.8.1: each one installed where it is needed, for as long as it is needed.

- ``CACHE_KEYWORD``: a call's cache recognised under transformers' ``cache=``
  (installed by ``StandardizedTransformer._batch`` while it batches a call's invokes);
- ``BACKWARD_GRAD_FOR_BLOCKS``: inside ``with metric.backward():`` nnsight's
  ``Tensor.grad`` serves the intervention block alone (held for the life of a
  sharded model, ``nnterp._tensor_parallel.bridge``);
- ``ALIASING``: nnsight's aliasing answered for less (installed by
  ``StandardizedTransformer`` while nnsight builds its envoy tree).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .._cache import given_cache
from . import Patch

if TYPE_CHECKING:
    from nnsight import Envoy


@Patch.of("nnsight.modeling.processing:encode_pretokenized")
def CACHE_KEYWORD(encode: Any) -> Any:
    """nnsight's ``encode_pretokenized`` knowing a cache under each keyword a call may hand it by.

    nnsight gives a call of token ids without a mask a mask of ones over its
    own tokens, except beside a cache, which the mask would have to cover too
    (the model builds that one itself); it knows a cache only by the name
    ``past_key_values``. transformers 5.24 takes the cache as ``cache=``, so a
    call continuing one that way got a mask over its new tokens alone, and
    the model attended as though the cached tokens were padding. Installed
    while ``StandardizedTransformer._batch`` batches a call's invokes (nnsight's
    ``batch_forward`` is the function's only caller). Delete it when
    ``nnsight.modeling.processing.encode_pretokenized`` tests for a cache under
    ``cache`` and ``cache_params`` too.
    """

    def bridged(encoding: dict) -> tuple:
        cache = given_cache(encoding)
        if cache is None or encoding.get("past_key_values") is not None:
            return encode(encoding)
        # the name nnsight knows, for its test alone: the forward keeps the keyword the call used
        rows, forward = encode({**encoding, "past_key_values": cache})
        forward.pop("past_key_values", None)
        return rows, forward

    return bridged


@Patch.of("nnsight.intervention.backward:_grad_property")
def BACKWARD_GRAD_FOR_BLOCKS(grad_property: Any) -> Any:
    """nnsight's backward ``Tensor.grad``, for reads from an intervention block alone; torch's for any other code.

    Inside ``with metric.backward():`` nnsight's ``Tensor.grad`` serves every
    caller's read, including the hook transformers puts on a replicated norm's
    weight under tensor parallelism (``replicated_with_grad_allreduce``:
    Qwen3-Next's q/k norms), which then waits for a gradient no block asked
    for, and the backward fails out of order. Held for the life of a sharded
    model (``nnterp._tensor_parallel.bridge``). Delete it when nnsight's
    ``nnsight.intervention.backward._grad_property`` serves only the block's
    own frames (the mediator test below, upstream).
    """
    from greenlet import getcurrent

    #: torch's own attribute: a descriptor on the class (torch's stubs declare an instance attribute, Tensor | None)
    native: Any = torch.Tensor.grad

    def bridged(interleaver: Any, *args: Any) -> property:
        served = grad_property(interleaver, *args)

        def from_block() -> bool:
            # the backward runs inside the forward's worker: only this session's own mediators are the block
            mediator = getattr(getcurrent(), "mediator", None)
            return mediator is not None and mediator() in interleaver.mediators

        def getter(tensor: torch.Tensor) -> Any:
            return served.fget(tensor) if from_block() else native.__get__(tensor)

        def setter(tensor: torch.Tensor, value: Any) -> None:
            if from_block():
                served.fset(tensor, value)
            else:
                native.__set__(tensor, value)

        return property(getter, setter)

    return bridged


# -- aliasing ----------------------------------------------------------------------------------------------------

#: the envoy class each (path, module type) resolved to, by the content of the (rename, envoys) maps: the same family
#: builds the same tree, so a second construction of it resolves no path again. nnterp's own table, read only while
#: ``ALIASING`` is installed (``ENVOY_CLASSES.clear()`` forgets it); kept across constructions on purpose, for the
#: construction's cost (benchmarks/README.md, "Construction, profiled")
ENVOY_CLASSES: dict[tuple, dict[tuple[str, type], type]] = {}
#: how many (rename, envoys) maps are kept; past it the table starts afresh
_KEPT_MAPS = 64


def _content(rename: Any, envoys: Any) -> tuple | None:
    """A hashable key for what resolving an envoy class reads off the two maps, in their order; None where it has none."""
    if not isinstance(envoys, dict) or not isinstance(rename, (dict, type(None))):
        return None
    key = (
        tuple(
            (name, tuple(aliases) if isinstance(aliases, list) else aliases) for name, aliases in (rename or {}).items()
        ),
        tuple(envoys.items()),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _miss_is_certain(envoy_type: type[Envoy]) -> bool:
    """Whether a name that is in no namespace of an envoy of this type, nor of its module, is an ``AttributeError`` with no side effect."""
    from nnsight import Envoy

    from ..components.layer import Layer
    from ..components.standard import Standard

    if any("__getattribute__" in vars(cls) for cls in envoy_type.__mro__[:-1]):
        return False
    # Envoy's falls through to the module; Standard's and Layer's then raise an AttributeError of their own
    # (UnknownValue, which works its message out only when read), except for the names guarded in _certain_miss
    return envoy_type.__getattr__ in (Envoy.__getattr__, Standard.__getattr__, Layer.__getattr__)


def _plain_module(module_type: type[torch.nn.Module]) -> bool:
    """Whether attribute lookup on a module of this type is torch's own: its namespaces, then parameters, buffers, submodules."""
    return module_type.__getattr__ is torch.nn.Module.__getattr__ and not any(
        "__getattribute__" in vars(cls) for cls in module_type.__mro__[:-1]
    )


@Patch.of(
    "nnsight.intervention.aliasing:spellings",
    "nnsight.intervention.aliasing:named",
    "nnsight.intervention.aliasing:path_ends_with",
    "nnsight.intervention.envoy:Envoy._resolve_envoy_class",
)
def ALIASING(nnsight_spellings: Any, nnsight_named: Any, nnsight_ends_with: Any, nnsight_resolve: Any) -> tuple:
    """nnsight's aliasing while a model is built: the same answers, fewer recomputed.

    Building the envoy tree with a family's ``rename`` and ``envoys`` maps is
    most of what a construction costs over plain nnsight (benchmarks/README.md),
    in three functions of ``nnsight.intervention.aliasing``:

    - ``spellings``: nnsight chooses each module's envoy class by matching every
      spelling of its path under the ``rename`` aliases against the ``envoys``
      keys, and recomputes the spellings of every ancestor for every module.
      They are a pure function of the rename map, the path and (for a class
      key) the module's type, so for the length of one install they are kept.
    - ``named``: ``bind`` asks every envoy for every ``rename`` key, and on all
      but one envoy in ten the key's first component is no attribute there;
      each such miss is a failed ``getattr`` through the envoy's
      ``__getattr__`` and the module's, several exceptions deep. Where the miss
      is certain from the envoy's and the module's namespaces (no instance
      entry, no class attribute, a ``__getattr__`` known to raise
      ``AttributeError`` for a name the module lacks, and nothing that
      ``__getattr__`` would record), the answer, no match, is given without
      the ``getattr``; anything else goes to nnsight's function.
    - ``path_ends_with``: a key without ``*`` ends a path component-wise
      exactly when the path is the key or ends with ``"." + key``.

    And the envoy class nnsight resolves for each module
    (``Envoy._resolve_envoy_class``) is a pure function of the two maps'
    content, the path and the module's type, so it is kept in ``ENVOY_CLASSES``
    across installs, by the maps' content. Installed by
    ``StandardizedTransformer.__init__`` around nnsight's construction; a
    nested construction shares the outer install. Delete it when nnsight keeps
    ``spellings`` and ``_resolve_envoy_class`` per map and answers ``named``'s
    certain misses itself.
    """
    from ..components.layer import Layer
    from ..components.standard import VALUE_NAMES

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
            found = kept[key] = nnsight_spellings(rename, path, module)
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
            and isinstance(parameters, dict)
            and isinstance(buffers, dict)
            and isinstance(modules, dict)
            and name not in parameters
            and name not in buffers
            and name not in modules
        )

    def named(envoy: Any, key: str | type) -> list:
        # a key whose first component is certainly no attribute of the envoy names nothing from it
        if isinstance(key, str) and certain_miss(envoy, key.lstrip(".").split(".")[0]):
            return []
        return nnsight_named(envoy, key)

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
            return nnsight_resolve(envoy, module, path)
        table = ENVOY_CLASSES.get(content)
        if table is None:
            if len(ENVOY_CLASSES) >= _KEPT_MAPS:
                ENVOY_CLASSES.clear()
            table = ENVOY_CLASSES[content] = {}
        found = table.get((path, type(module)))
        if found is None:
            found = table[(path, type(module))] = nnsight_resolve(envoy, module, path)
        return found

    return spellings, named, path_ends_with, resolve
