"""The descriptors standard values are made of.

``EProperty`` is nnsight's ``eproperty`` with three additions: its key is a
path from the host envoy rather than a suffix of the host's own path, it can
say when it is unavailable, and it can serve one element of what the location
holds. ``DerivedEProperty`` computes a value from other served values, and
``unavailable(reason)`` is how a family says it has no such value.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, ClassVar

from nnsight.intervention.eproperty import WriteBack, eproperty
from nnsight.intervention.interleaver import Mediator, OutOfOrderError
from nnsight.intervention.util import first_input, replace_first_input

import torch
from greenlet import getcurrent

from . import _tensor_parallel as tensor_parallel
from . import layouts
from ._gradients import mark
from ._order import note_served, translated
from ._pitfalls import outside_trace
from ._spelling import spelled_cached
from ._writes import check_against, check_before
from .errors import OutOfOrder, SourceNotAvailable, Unavailable

#: the attributes a path can end in, and the location suffix each is served at
SERVED = {"output": "output", "input": "input", "inputs": "input"}

Reason = str | Callable[[Any], str | None] | None
Select = int | str | Callable[[Any], int | str | None] | None


#: where an envoy keeps the values the proof at load withdrew from it (``nnterp.proof``): value name -> reason
REFUTED = "_nnterp_refuted"
#: what an object without a ``__dict__`` has refuted: nothing (shared, never written)
_NONE: dict = {}


#: ``_unserve``'s default: the element a value is served from, resolved when it is put back
_READ_NOW = object()

#: how many values the proof has withdrawn, on any model: what a memo of which values are available keys on
_withdrawals = [0]


def withdraw(obj: Any, name: str, reason: str) -> None:
    """Make the value ``name`` of the envoy ``obj`` unavailable with ``reason`` (the proof's refutation), and say so to memos."""
    obj.__dict__.setdefault(REFUTED, {})[name] = reason
    _withdrawals[0] += 1


def withdrawals() -> int:
    """How many refutations have been recorded so far (``withdraw``): a memo made at another count may be stale."""
    return _withdrawals[0]


def refutation(obj: Any, name: str) -> str | None:
    """Why the proof at load withdrew the value ``name`` from the envoy ``obj``, or None where it did not."""
    refuted = getattr(obj, "__dict__", _NONE).get(REFUTED)  # asked on every read: no dict made for the answer None
    return None if refuted is None else refuted.get(name)


class EProperty(eproperty):
    """An eproperty whose key is a path from the host, and which can say when it is unavailable.

    ``key`` is where the value lives, relative to the host envoy: dotted
    segments ending in ``output``, ``input`` (the first argument) or ``inputs``
    (the ``(args, kwargs)`` pair). A segment is a child by its standard or
    native name, and ``source`` the forward's operations; each leading ``../``
    climbs to the parent. So ``"../post_attention_layernorm.output"`` is a
    sibling's output and
    ``"source.attention_interface_1.source.nn_functional_softmax_0.input"`` an
    argument of an operation inside a called function. A leading ``/`` walks
    from the model's root. ``key`` may be a function of the envoy.

    ``unavailable`` is a reason, or a function of the envoy returning one or
    None; a value whose path names a module the block does not have is
    unavailable with that reason too. ``select`` serves one element: an
    argument by position or name on ``inputs``, an element of a tuple output
    (a bare tensor stands for its own element 0). ``assign_in_place`` makes an
    assignment copy into the live tensor rather than swap a new one in: for a
    stream the forward has bound under two names (the residual and the norm's
    input), so that an assignment, like an in-place edit, reaches both.
    ``summand`` says the value is a term of the sum the module it is read
    inside returns (each slot's expert output, which the experts module sums):
    where tensor parallelism leaves that module's output a partial sum on each
    rank, so is the value, and a read all-reduces it (``nnterp._tensor_parallel``).
    ``off_the_graph`` says why the logits do not depend on the value through
    the tensor served (a state written only to the cache): no gradient reaches
    it, and the kit's ``interior_gradients_are_derivatives`` leaves it out with
    that reason instead of failing; None (the default) where one does.
    ``none_when_fresh`` says why the value is None on a call that starts from
    no cache (the state a recurrent call starts from): the toolkit's functions
    that run only such calls (``cache_values``, ``extract_values``) leave it out
    of a wildcard with that reason, and refuse it by name before the model runs.

    An assignment is checked before it lands (``nnterp._writes``): against the
    layout on a text block before the model runs, then against the value a read
    would return at the location; a descriptor that serves a value in another
    layout than the model holds overrides ``_shown`` (the read's value from the
    location's) and ``_put`` (the checked value back into the model's layout),
    never ``__set__``. Reading out of forward order raises ``OutOfOrder`` (or
    ``NeverRan``) naming the values as the user wrote them.

    Reads, assignments and in-place edits all go through the interleaver as
    ``.output`` does. A path through ``source`` is walked before every read
    and write, because an operation inside a called function exists only once
    that call has been drilled into in the current run.
    """

    #: the value's name: the decorated function's (``eproperty.__call__``), else, for a value assigned undecorated
    #: (``unavailable(...)``), the attribute's it is assigned to (``__set_name__``); None only until then
    name: str

    def __init__(
        self,
        key: str | Callable[[Any], str] | None = None,
        description: str | None = None,
        unavailable: Reason = None,
        select: Select = None,
        assign_in_place: bool = False,
        read_only: str | None = None,
        summand: bool = False,
        off_the_graph: str | None = None,
        none_when_fresh: str | None = None,
        layout: Any = None,
    ) -> None:
        super().__init__(key=None, description=description)
        self.key = key
        self.select = select
        self.assign_in_place = assign_in_place
        self.summand = summand
        #: why the value cannot be assigned (it is read off the inputs, or derived), or None where it can
        self.read_only = read_only
        #: why no gradient of the logits reaches the tensor served (it is beside the graph by design), or None where one does
        self.off_the_graph = off_the_graph
        #: why a call that starts from no cache serves None for the value, or None where every call serves it
        self.none_when_fresh = none_when_fresh
        #: the value's shape as a jaxtyping type (``Residual``, ``Pattern``, ...): given here, else the return
        #: annotation of the function decorated, else (where the class defines it) the value of the same name it redefines
        self.layout = layout
        self._unavailable = unavailable

    def __call__(self, preprocess: Callable) -> EProperty:
        """Decorate the function that computes the value from what the location holds; its return annotation is the layout."""
        super().__call__(preprocess)
        if self.layout is None:
            self.layout = annotated_layout(preprocess)
        return self

    def __set_name__(self, owner: type, name: str) -> None:
        if self.name is None:
            self.name = name
        if self.layout is None:
            # a value redefined without a layout of its own (``unavailable(...)``, ``derived``) keeps its base's
            self.layout = next(
                (other.layout for base in owner.__mro__[1:] if isinstance(other := vars(base).get(name), EProperty)),
                None,
            )

    def __reduce__(self) -> tuple:
        # A property subclass has no pickle support of its own, and a family's
        # classes travel by value to a remote backend that does not have them.
        return (_rebuilt, (type(self), dict(self.__dict__)))

    #: what ``evolve`` calls a field the object keeps under another attribute
    _FIELD_ATTRIBUTES: ClassVar[dict[str, str]] = {
        "unavailable": "_unavailable",
        "read": "_preprocess",
        "write": "_postprocess",
        "write_back": "_transform",
        "doc": "__doc__",
    }

    def evolve(self, *, kind: type[EProperty] | None = None, **changes: Any) -> Any:
        """A copy of this value with ``changes``: the one way a family moves, rescales or relays a value.

        The copy keeps the class (``kind`` gives another, e.g. ``TokenEProperty``
        where the model holds the value flat over tokens) and every field not
        changed: the meaning, the docstring, the layout, a subclass's own fields.
        ``changes`` name fields (``key``, ``select``, ``unavailable``, ``layout``,
        ``read_only`` ...) and the three functions: ``read`` (the preprocess,
        ``(envoy, served) -> value``), ``write`` (the postprocess, ``(envoy,
        written) -> held``) and ``write_back`` (``(envoy, view, served) ->
        held``, run when the worker moves on).
        """
        fields = {name for name in vars(self) if not name.startswith("_")} | set(self._FIELD_ATTRIBUTES)
        unknown = sorted(set(changes) - fields)
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.evolve: no field {', '.join(unknown)}; fields: {', '.join(sorted(fields))}"
            )
        moved = _rebuilt(kind or type(self), dict(self.__dict__))
        for name, value in changes.items():
            setattr(moved, self._FIELD_ATTRIBUTES.get(name, name), value)
        return moved

    def at(self, key: str | Callable[[Any], str] | None = None, **changes: Any) -> Any:
        """This value read at another path: ``evolve(key=key, **changes)``, how a family moves one.

        ``layer_mid = Layer.layer_mid.at("pre_feedforward_layernorm.input")``
        keeps the meaning, the docstring and the layout, and changes where it lives.
        """
        return self.evolve(**changes) if key is None else self.evolve(key=key, **changes)

    def derived(self, compute: Callable[[Any], Any]) -> DerivedEProperty:
        """This value computed by ``compute(envoy)`` from other served values: the same meaning, docstring and layout, read-only.

        ``layer_input_rescaling = Layer.layer_input_rescaling.derived(lambda block: ...)``
        is how a family serves a term the model never holds as one tensor.
        """
        found = DerivedEProperty(compute, self.description, layout=self.layout)
        found.name, found.__doc__ = self.name, compute.__doc__ or self.__doc__
        return found

    def reading(self, then: Callable[[Any, Any], Any], **changes: Any) -> Any:
        """This value with ``then(envoy, value)`` applied to what its read serves (its own read first, if any)."""
        base = self._preprocess

        def read(envoy: Any, served: Any) -> Any:
            return then(envoy, base(envoy, served) if base is not None else served)

        return self.evolve(read=read, **changes)

    def laid_back(self, lay: Callable[[Any, Any, Any], Any] | None = None) -> EProperty:
        """This value, the view a read serves handed back to the model laid out as it holds it: the forward goes on from it.

        A preprocess that serves a new view of the model's tensor (an
        unsqueeze, a flatten, a transpose) leaves the view beside the graph:
        the model computes with its own tensor, so no gradient reaches what the
        user holds. Laid back out by ``lay(envoy, view, served)`` (the
        postprocess by default) and swapped in when the worker moves on, it is
        the same storage and numbers, in-place edits included, and
        ``value.grad`` in a ``backward()`` is the metric's derivative.
        """
        back = self._postprocess

        def write_back(envoy: Any, view: Any, served: Any) -> Any:
            if lay is not None:
                return lay(envoy, view, served)
            return back(envoy, view) if back is not None else view

        return self.evolve(write_back=write_back)

    def scaled(self, factor: Callable[[Any], float], **changes: Any) -> EProperty:
        """This value times ``factor(envoy)``: a sublayer whose output the block scales before adding it.

        Reads see ``value * factor``; an assignment and an in-place edit are
        divided back before they reach the model, and an unedited read writes
        back the model's own tensor, so reading changes nothing.
        """
        base = self._preprocess

        def read(envoy: Any, served: Any) -> Any:
            value = base(envoy, served) if base is not None else served
            product = value * factor(envoy)
            if getattr(served, "_nnsight_batch", False):
                product._nnsight_batch = True  # still this invoke's rows alone, as nnsight served them
            product._nnterp_scaled_from = (value, product.detach().clone())
            return product

        def write_back(envoy: Any, view: Any, served: Any) -> Any:
            scaled_from: tuple[Any, Any] = getattr(view, "_nnterp_scaled_from", (None, None))
            original, unedited = scaled_from
            if original is not None and torch.equal(view, unedited):
                return gradient_through(original, view, factor(envoy))
            return view / factor(envoy)

        return self.evolve(
            read=read, write=lambda envoy, value: value / factor(envoy), write_back=write_back, **changes
        )

    # -- what the value is -------------------------------------------------------

    @property
    def dims(self) -> tuple[str, ...] | None:
        """The axis names of ``layout``: ``("batch", "seq", "hidden_size")``."""
        layout = self.layout
        return None if layout is None else layouts.dims(layout)

    def key_for(self, obj: Any) -> str:
        """The path for ``obj``: the key itself, or what the key function returns for it."""
        key = self.key(obj) if callable(self.key) else self.key
        return key if key is not None else self.name

    def inside_forward(self) -> bool:
        """Whether the value is an operation inside a forward (a key function, or a ``source`` segment)."""
        return callable(self.key) or "source" in (self.key or "").split(".")

    @staticmethod
    def served(path: str) -> str:
        """The served attribute a path ends in: ``output``, ``input`` or ``inputs``."""
        return path.rsplit(".", 1)[-1]

    def reason(self, obj: Any) -> str | None:
        """Why this value is not available on ``obj``, or None when it is."""
        refuted = refutation(obj, self.name)
        if refuted is not None:
            return refuted
        reason = self._unavailable(obj) if callable(self._unavailable) else self._unavailable
        if reason is not None:
            return reason
        return self._missing_module(obj)

    def _start(self, obj: Any, path: str) -> tuple[Any, tuple[str, ...]]:
        """Where a path starts (the host, an ancestor for each ``../``, the root for ``/``) and its dotted segments."""
        from_root, climbs, segments = _parsed(path)
        node = obj.root if from_root else obj
        for _ in range(climbs):
            node = node.parent
        return node, segments

    def _missing_module(self, obj: Any) -> str | None:
        # The modules a path names exist outside a trace, so a path through a
        # module this block lacks is reported before anything runs.
        node, segments = self._start(obj, self.key_for(obj))
        for segment in segments[:-1]:
            if segment == "source":
                return None
            child = node.__dict__.get(segment)
            if child is None:
                return f"no {segment} module on this block"
            node = child
        return None

    def __str__(self) -> str:
        layout = self.layout
        if layout is None:
            return super().__str__()
        axes = " ".join(layouts.dims(layout))
        return f"({self.name}) -> {layouts.layout_name(layout)} [{axes}]: {self.description}"

    # -- where the value is --------------------------------------------------------

    def _locate(self, obj: Any) -> tuple[str, str]:
        """Walk the path (drilling where it goes through ``source``); the location and what it ends in."""
        path = self.key_for(obj)
        node, segments = self._start(obj, path)
        walk, last = segments[:-1], segments[-1]
        if last not in SERVED:
            raise ValueError(f"{self.name}: the path {path!r} must end in one of {sorted(SERVED)}")
        for index, segment in enumerate(walk):
            if segment == "source":
                node = node.source
            else:
                try:
                    node = getattr(node, segment)
                except AttributeError as error:
                    if walk[index - 1 : index] == ("source",):
                        raise SourceNotAvailable(
                            f"{type(obj).__name__}.{self.name}", path, segment, tuple(node.names)
                        ) from error
                    raise
        return f"{node.path}.{SERVED[last]}", last

    def _serve(self, obj: Any, raw: Any, last: str) -> Any:
        """What the location holds, narrowed to what the value is."""
        value = first_input(*raw) if last == "input" else raw
        select = self.select(obj) if callable(self.select) else self.select
        if select is None:
            return value
        if last == "inputs":
            args, kwargs = value
            if isinstance(select, int):
                return args[select]
            return kwargs[select]
        if isinstance(select, str):
            return value[select] if isinstance(value, dict) else getattr(value, select)
        if isinstance(value, (tuple, list)):
            return value[select]
        if select == 0:
            return value
        raise IndexError(f"{self.name}: element {select} of a {type(value).__name__}, which has one")

    def _unserve(self, obj: Any, raw: Any, last: str, value: Any, select: Any = _READ_NOW) -> Any:
        """``value`` put back where it was served from in ``raw`` (at ``select``, where the read resolved it already)."""
        if last == "input":
            return replace_first_input(*raw, value)
        if select is _READ_NOW:
            select = self.select(obj) if callable(self.select) else self.select
        if select is None:
            return value
        if last == "inputs":
            args, kwargs = raw
            if isinstance(select, int):
                return (*args[:select], value, *args[select + 1 :]), kwargs
            return args, {**kwargs, select: value}
        if isinstance(select, str):
            if isinstance(raw, dict):
                raw[select] = value
            else:
                setattr(raw, select, value)
            return raw
        if isinstance(raw, (tuple, list)):
            return type(raw)((*raw[:select], value, *raw[select + 1 :]))
        return value

    def _plain(self, last: str) -> bool:
        # Whether a written value is the location's whole value.
        return last != "input" and self.select is None

    # -- reading and writing -------------------------------------------------------

    def _check(self, obj: Any) -> None:
        reason = self.reason(obj)
        if reason is not None:
            raise Unavailable(obj if hasattr(obj, "path") else type(obj).__name__, self.name, reason)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        self._check(obj)
        sharded = tensor_parallel.mesh_of(obj) is not None
        try:
            try:
                value = self._read(obj, sharded)
            except OutOfOrder:
                raise
            except OutOfOrderError as error:
                better = self._translated(obj, "read", error)
                if better is None:
                    raise
                raise better from None
            except ValueError:
                outside = self._outside(obj, "read")
                if outside is None:
                    raise
                raise outside from None
            if sharded:
                value = tensor_parallel.read_whole(self, obj, value, self._transform is None)
        except AttributeError as error:
            # A property getter's AttributeError makes Python fall back to
            # __getattr__, which would blame the attribute; Standard.__getattr__
            # re-raises this one, with its own line.
            obj.__dict__["_nnterp_error"] = (self.name, error)
            raise
        self._served(obj, value)
        return value

    def _served(self, obj: Any, value: Any) -> None:
        # what the next out-of-order message names as read before, and what a .grad read names
        note_served(Mediator.current(self.name), self, obj)
        mark(value, spelled_cached(obj, self.name))

    def _in_order(self, obj: Any, verb: str, action: Callable, *args: Any) -> Any:
        """``action(*args)``, with nnsight's out-of-order error for this value said in standard names."""
        try:
            return action(*args)
        except OutOfOrder:
            raise
        except OutOfOrderError as error:
            better = self._translated(obj, verb, error)
            if better is None:
                raise
            raise better from None
        except ValueError:
            outside = self._outside(obj, verb)
            if outside is None:
                raise
            raise outside from None

    def _outside(self, obj: Any, verb: str) -> ValueError | None:
        """``OutsideTrace`` for nnsight's ``Cannot access ... outside of interleaving`` (no worker runs), else None."""
        if getattr(getcurrent(), "mediator", None) is not None or not hasattr(obj, "path"):
            return None
        return outside_trace(spelled_cached(obj, self.name), verb)

    def _translated(self, obj: Any, verb: str, error: OutOfOrderError) -> OutOfOrder | None:
        """The ``OutOfOrder`` (or ``NeverRan``) in standard names to raise for nnsight's ``error``, or None to keep it."""
        better = translated(self, obj, verb, Mediator.current(self.name))
        if better is not None:
            better.native = error
        return better

    def _read(self, obj: Any, sharded: bool | None = None) -> Any:
        """The value at the location (``sharded``: whether the model is, where the caller has asked already)."""
        location, last = self._locate(obj)
        # a sharded model's reads are held too: tensor_parallel.read_whole gathers them and writes an edit back
        if sharded is None:
            sharded = tensor_parallel.mesh_of(obj) is not None
        held = self._transform is not None or sharded
        if held:
            mediator = Mediator.current(location)
            occurrence = mediator.wanted(location)
            waiting = mediator.transform
            if waiting is not None and waiting.key == (self, location, occurrence):
                return waiting.view
        raw = Mediator.value(location)
        served = self._serve(obj, raw, last)
        value = self._preprocess(obj, served) if self._preprocess is not None else served
        if self._transform is None:
            shown = self._laid_out_for_user(obj, location, last, raw, served, value)
            if held:
                mediator.transform = WriteBack(lambda: raw, shown, self, location, occurrence)
            return shown
        select = self.select(obj) if callable(self.select) else self.select
        value = self._held(obj, location, value)
        write_back = partial(self._write_back, obj, value, served, raw, last, select)
        mediator.transform = WriteBack(write_back, value, self, location, occurrence)
        return value

    def _laid_out_for_user(self, obj: Any, location: str, last: str, raw: Any, served: Any, value: Any) -> Any:
        """An untransformed read's value in the layout the user sees: as the preprocess left it (``TokenEProperty`` unflattens it)."""
        return value

    def _held(self, obj: Any, location: str, value: Any) -> Any:
        """What a transformed read's worker holds and its write-back is handed: the preprocess's value (``TokenEProperty``
        hands a flat view of the rows it serves, so that a write-back computed from it is computed from them)."""
        return value

    def _write_back(self, obj: Any, view: Any, served: Any, raw: Any, last: str, select: Any = _READ_NOW) -> Any:
        # the element the read took: a write-back is flushed when the worker next asks, under tracer.iter
        # possibly on the next call already, where a select that depends on the call would name another element
        return self._unserve(obj, raw, last, self._transform(obj, view, served), select)

    def _shown(self, obj: Any, raw: Any, last: str) -> Any:
        """What a read of this value returns from ``raw``, the location's value (a write must match it)."""
        served = self._serve(obj, raw, last)
        return self._preprocess(obj, served) if self._preprocess is not None else served

    def __set__(self, obj: Any, value: Any) -> None:
        if self.read_only is not None:
            raise AttributeError(f"{self.name} is read-only: {self.read_only}")
        self._check(obj)
        self._in_order(obj, "written", self._assign, obj, value)
        note_served(Mediator.current(self.name), self, obj)

    def _assign(self, obj: Any, value: Any) -> None:
        """Check ``value`` against the layout, then against the value it replaces, then write it."""
        check_before(self, obj, value, Mediator.current(self.name))
        location, last = self._locate(obj)
        raw = Mediator.value(location)
        shown = self._shown(obj, raw, last)
        piece = tensor_parallel.piece(self, obj, location, shown)
        check_against(self, obj, value, shown, None if piece is None else piece.whole_shape(shown))
        self._put(obj, value if piece is None else piece.local(value), location, last, raw)

    def _put(self, obj: Any, value: Any, location: str, last: str, raw: Any) -> None:
        """Write ``value`` (already checked) where ``raw`` was served from."""
        if self._postprocess is not None:
            value = self._postprocess(obj, value)
        if self.assign_in_place:
            self._serve(obj, raw, last).copy_(value)
            return
        if not self._plain(last):
            value = self._unserve(obj, raw, last, value)
        Mediator.swap(location, value)


@functools.lru_cache(maxsize=4096)
def _parsed(path: str) -> tuple[bool, int, tuple[str, ...]]:
    """A path's parts, worked out once per string: from the root (``/``), how many ``../`` climbs, the dotted segments."""
    from_root = path.startswith("/")
    if from_root:
        path = path[1:]
    climbs = 0
    while path.startswith("../"):
        climbs, path = climbs + 1, path[3:]
    return from_root, climbs, tuple(path.split("."))


def annotated_layout(function: Callable) -> Any:
    """The layout ``function``'s return annotation names (a value that may be None has its tensor's), or None."""
    if "return" not in getattr(function, "__annotations__", {}):
        return None
    hint = typing.get_type_hints(function).get("return", Any)
    members = [member for member in typing.get_args(hint) if member is not type(None)]
    if isinstance(hint, types.UnionType) and len(members) == 1:
        hint = members[0]
    return None if hint is Any else hint


def redefine(cls: type, **values: EProperty) -> type:
    """``cls`` with ``values`` set on it as if written in its body (named, a missing layout taken from its bases)."""
    for name, value in values.items():
        setattr(cls, name, value)
        value.__set_name__(cls, name)
    return cls


def redefining(names: Iterable[str], change: Callable[[EProperty], EProperty]) -> Callable[[type], type]:
    """A class decorator: each value of ``names`` the class inherits (from its first base), as ``change(value)`` makes it.

    ``@redefining(STREAM, lambda value: value.at(unavailable=no_images))``
    redefines a group of values alike instead of a line for each.
    """

    def decorate(cls: type) -> type:
        return redefine(cls, **{name: change(getattr(cls.__mro__[1], name)) for name in names})

    return decorate


def gradient_through(original: Any, view: Any, factor: float) -> Any:
    """``original``'s exact values, differentiated through ``view = original * factor``: an unedited scaled read put back.

    The forward goes on with the model's own tensor bit for bit (``view -
    view.detach()`` is zero), but where autograd records, the gradient reaches
    the model's tensor through the served ``view``, so ``view.grad`` in a
    backward is the metric's derivative with respect to the value as served.
    The result keeps ``original``'s dtype where the view is served in another
    (Gemma 3n's float32 mixing on a bfloat16 load).
    """
    if not (torch.is_grad_enabled() and getattr(view, "requires_grad", False)):
        return original
    return original.detach() + ((view - view.detach()) / factor).to(original.dtype)


def _rebuilt(cls: type[EProperty], state: dict) -> EProperty:
    """An EProperty of class ``cls`` with ``state``: how one is unpickled."""
    value = cls.__new__(cls)
    property.__init__(value)
    value.__dict__.update(state)
    return value


class DerivedEProperty(EProperty):
    """An EProperty computed from other served values rather than read at one location.

    ``compute(envoy)`` runs at read time inside the trace and may read any
    number of values; the result is read-only.
    """

    def __init__(
        self,
        compute: Callable[[Any], Any],
        description: str | None = None,
        unavailable: Reason = None,
        layout: Any = None,
    ) -> None:
        super().__init__(
            key=None,
            description=description,
            unavailable=unavailable,
            read_only="derived from other values",
            layout=layout,
        )
        self.compute = compute
        self.__doc__ = compute.__doc__

    def inside_forward(self) -> bool:
        return True

    def _missing_module(self, obj: Any) -> str | None:
        return None

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        self._check(obj)
        try:
            value = self.compute(obj)
        except AttributeError as error:
            # as EProperty.__get__: Python would fall back to __getattr__, which would blame the attribute (an
            # operation a release moved, under a value computed from it, read as "belongs to another component")
            obj.__dict__["_nnterp_error"] = (self.name, error)
            raise
        mark(value, spelled_cached(obj, self.name))
        return value


class TokenEProperty(EProperty):
    """An EProperty whose tensor the model holds flat over tokens, ``[batch * seq, ...]``: served as ``[batch, seq, ...]``.

    A module that holds it already laid out (one axis more, as the layout
    says) is served as a plain EProperty would, so one declaration covers
    families that flatten and families that do not.

    The preprocess, postprocess and transform see the model's own flat tensor;
    the user sees and writes this invoke's rows. A read is a view of them, so
    an in-place edit lands on the model's tensor; an assignment is spliced
    into the whole tensor the location holds now, so under several invokes
    each one's edit stays in its rows.
    """

    @staticmethod
    def _rows(location: str, flat: Any) -> tuple[int, int, int]:
        # (rows in the whole batch, this invoke's first row, its row count)
        mediator = Mediator.current(location)
        batcher = getattr(mediator.interleaver, "batcher", None)
        total = getattr(batcher, "total", 0) or 1
        if flat.shape[0] % total:
            raise ValueError(f"a token-flat tensor of {flat.shape[0]} rows does not split over a batch of {total}")
        start, size = mediator.batch_group or (0, total)
        return total, start, size

    def _laid_out(self, tensor: Any) -> bool:
        # A family whose module already holds [batch, seq, ...] here: nnsight serves its rows as is.
        dims = self.dims
        return dims is not None and tensor.ndim == len(dims)

    def _read(self, obj: Any, sharded: bool | None = None) -> Any:
        if self._transform is None:
            return super()._read(obj, sharded)  # laid out (and differentiated through) by _laid_out_for_user
        location, _ = self._locate(obj)
        held = super()._read(obj, sharded)
        shown = getattr(held, "_nnterp_shown", None)
        return shown if shown is not None else self._as_shown(obj, self._invoke_rows(location, held))

    def _held(self, obj: Any, location: str, value: Any) -> Any:
        """The flat tensor the write-back is handed, as a view of the rows served, so a backward reaches them.

        The rows are a view of the preprocess's flat tensor: a write-back
        computed from that tensor (``scaled``'s, ``gradient_through``) is
        computed beside the rows the user holds, and no gradient reaches them.
        Handed the rows laid back out instead (the same storage and numbers,
        what the preprocess noted on its tensor kept), the model's tensor is
        computed from the rows served; a repeated read before the flush is
        answered with the same rows. Left as it is under several invokes (each
        serves a slice of the batch), without gradients, or where the rows are
        no view of it in that shape.
        """
        if not (torch.is_grad_enabled() and isinstance(value, torch.Tensor) and value.requires_grad):
            return value
        if getattr(value, "_nnsight_batch", False):
            return value
        shown = self._as_shown(obj, self._invoke_rows(location, value))
        if shown is value:
            return value
        if not self._laid_out(value):
            total, _, size = self._rows(location, value)
            if size != total:
                return value
        try:
            through = self._as_held(obj, shown).view(value.shape)
        except RuntimeError:
            return value
        through.__dict__.update(value.__dict__)
        through._nnterp_shown = shown
        return through

    def _as_shown(self, obj: Any, rows: Any) -> Any:
        """This invoke's rows as the user sees them (a view); ``_as_held`` is its inverse, back to the rows' layout."""
        return rows

    def _as_held(self, obj: Any, shown: Any) -> Any:
        return shown

    def _laid_out_for_user(self, obj: Any, location: str, last: str, raw: Any, served: Any, value: Any) -> Any:
        shown = self._as_shown(obj, self._invoke_rows(location, value))
        # a stream bound under two names is written in place (assign_in_place): a swap would reach only one of them
        if (
            shown is not value
            and value is served
            and not self.assign_in_place
            and torch.is_grad_enabled()
            and shown.requires_grad
        ):
            self._differentiated_through(obj, location, last, raw, value, self._as_held(obj, shown))
        return shown

    def _differentiated_through(self, obj: Any, location: str, last: str, raw: Any, flat: Any, rows: Any) -> None:
        """Hand the model its flat tensor back as a view of the rows served, so a backward reaches the value as served.

        The values and the storage are the model's own (an in-place edit of
        the rows still lands), only autograd's record now passes through the
        served rows. Under several invokes each serves a slice of the batch,
        and the flat tensor is left as it was: ``.grad`` reaches only the
        whole batch's rows.
        """
        if getattr(flat, "_nnsight_batch", False):
            return
        if not self._laid_out(flat):
            total, _, size = self._rows(location, flat)
            if size != total:
                return
        try:
            through = rows.view(flat.shape)
        except RuntimeError:
            return  # not a view of the model's storage in that shape: swapping a copy in would cut in-place edits off
        Mediator.swap(location, through if self._plain(last) else self._unserve(obj, raw, last, through))

    def _invoke_rows(self, location: str, flat: Any) -> Any:
        """This invoke's ``[batch, seq, ...]`` rows of the model's tensor, as a view."""
        if self._laid_out(flat):
            return flat
        if getattr(flat, "_nnsight_batch", False):
            # one token a row (a decode step): nnsight has already served this invoke's rows
            return flat.unsqueeze(1)
        total, start, size = self._rows(location, flat)
        return flat.view(total, flat.shape[0] // total, *flat.shape[1:])[start : start + size]

    def _shown(self, obj: Any, raw: Any, last: str) -> Any:
        location, _ = self._locate(obj)
        return self._invoke_rows(location, super()._shown(obj, raw, last))

    def _put(self, obj: Any, value: Any, location: str, last: str, raw: Any) -> None:
        flat = super()._shown(obj, raw, last)
        if self._laid_out(flat):
            super()._put(obj, value, location, last, raw)
            return
        if getattr(flat, "_nnsight_batch", False):
            # one token a row: nnsight serves and splices this invoke's rows itself
            super()._put(obj, value.reshape(flat.shape), location, last, raw)
            return
        total, start, size = self._rows(location, flat)
        whole = flat.clone().view(total, flat.shape[0] // total, *flat.shape[1:])
        whole[start : start + size] = value
        super()._put(obj, whole.view(flat.shape), location, last, raw)


class Placeholder(EProperty):
    """A value a family does not have: every access raises ``Unavailable`` with the reason."""

    #: the reason, a string (``unavailable(reason)``)
    _unavailable: str

    def inside_forward(self) -> bool:
        return False

    def reason(self, obj: Any) -> str:
        return self._unavailable

    def _locate(self, obj: Any) -> tuple[str, str]:  # pragma: no cover - _check raises first
        raise Unavailable(obj, self.name, self._unavailable)

    def __str__(self) -> str:
        return f"({self.name}): unavailable: {self._unavailable}"


def declared_values(cls: type) -> dict[str, EProperty]:
    """Every standard value a class declares, by name, in the order first declared (base classes first).

    A subclass's redefinition wins but keeps the place where the base declared
    the value: a family that moves ``layer_mid`` moves where it is read, not
    where it comes in the forward, and the components declare their values in
    forward order (a module's contribution first, then its interior).
    """
    found: dict[str, EProperty] = {}
    for klass in reversed(cls.__mro__):
        for name, attribute in vars(klass).items():
            if isinstance(attribute, EProperty):
                found[name] = attribute
    return found


def unavailable(reason: str) -> EProperty:
    """A value a family does not have: assign it in the class body in place of the inherited one.

    ``attention_probabilities = unavailable("no softmax: the attention is linear")``
    keeps the name in the tree and in the repr, with the reason, and makes any
    access raise ``Unavailable`` with it.
    """
    return Placeholder(description=reason, unavailable=reason)
