"""The envoy every standard component is: values listed, availability reported, errors kept."""

from __future__ import annotations

from typing import Any, ClassVar

from nnsight import Envoy
from nnsight.intervention.source import install_source

from .._spelling import spelled
from ..descriptors import EProperty, declared_values
from ..errors import OtherComponent, UnknownValue


def first_tensor(value: Any) -> Any:
    """The tensor of a module output: the first element when it is a tuple."""
    return value[0] if isinstance(value, (tuple, list)) else value


def rewrap(raw: Any, value: Any) -> Any:
    """``value`` in the shape the module returned: back in its tuple, if any."""
    if isinstance(raw, (tuple, list)):
        return type(raw)((value, *raw[1:]))
    return value


class Standard(Envoy):
    """An envoy carrying standard values: what ``Layer``, ``Attention`` and ``Mlp`` share.

    A value that is an operation inside this module's forward is served only on
    a call whose forward was instrumented before the call began. Instrumenting
    on first read is enough when the read comes before the module runs, the
    usual case; a family whose value sits in a forward that is already running
    when it is read (a block's own arithmetic read after its attention) sets
    ``sourced = True``, and the forward is instrumented when the envoy is built
    and again when real weights replace meta ones.
    """

    #: whether the forward is instrumented when the envoy is built (and when real weights replace meta ones), not on
    #: first read: False here; a family sets it where a value sits in a forward already running when it is read
    sourced: ClassVar[bool] = False
    #: why this kind of component has none of the values other kinds declare (a dense MLP routes nothing):
    #: the reason ``mlp.router_logits`` raises on a dense block. Each base component states its own kind
    lacks: ClassVar[str] = "this component is of another kind"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # explicit: a class rebuilt by value on a remote backend runs this before its __class__ cell exists
        super(Standard, cls).__init_subclass__(**kwargs)  # noqa: UP008 - no __class__ cell on a remote rebuild
        VALUE_NAMES.update(key for key, value in vars(cls).items() if _served_name(key, value))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.sourced:
            install_source(self)

    def _update(self, module: Any) -> None:
        super()._update(module)
        if self.sourced:
            install_source(self)

    @classmethod
    def values(cls) -> dict[str, EProperty]:
        """Every standard value this component declares, by name, in declaration order."""
        return declared_values(cls)

    def support(self) -> dict[str, str | None]:
        """Each of this envoy's values: None where it is available, else the reason it is not."""
        return {name: value.reason(self) for name, value in type(self).values().items()}

    def __getattr__(self, name: str) -> Any:
        stashed = self.__dict__.pop("_nnterp_error", None)
        if stashed is not None and stashed[0] == name:
            raise stashed[1]
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_"):
                raise
            owner = _declared_elsewhere(type(self), name) if name in VALUE_NAMES else None
            if owner is not None:
                hosts = [
                    child for key, child in vars(self).items() if isinstance(child, owner) and not key.startswith("_")
                ]
                where = f", read it as {spelled(hosts[0], name)}" if hosts else ""
                raise OtherComponent(self, name, f"{self.lacks}; {name} belongs to {owner.__name__}{where}") from None
            raise UnknownValue(self, name) from None


#: the name of every value and method some component declares: names only, so a miss on any other name (a
#: hasattr probe for a module) costs one set lookup, and nothing here holds a class
VALUE_NAMES: set[str] = set()


def _components(base: type = Standard) -> list[type]:
    """Every component class, base classes first (breadth first from ``Standard``)."""
    found, queue = [], [base]
    while queue:
        cls = queue.pop(0)
        if cls not in found:
            found.append(cls)
            queue.extend(cls.__subclasses__())
    return found


def _served_name(key: str, value: Any) -> bool:
    """Whether a class attribute is one a user reads off a component: a standard value, or a public method (state_after)."""
    return (
        value is not None
        and not key.startswith("_")
        and (isinstance(value, EProperty) or (callable(value) and not isinstance(value, type)))
    )


def _declared_elsewhere(cls: type, name: str) -> type | None:
    """The component class (base classes first) declaring the value or method ``name``, when ``cls`` is none of its kind.

    Worked out on each miss, not kept: a table of classes would travel with the
    components to a remote backend (they are pickled by value there), and with
    it every class a user or a test ever defined.
    """
    owner = next((other for other in _components() if _served_name(name, vars(other).get(name))), None)
    return owner if owner is not None and not issubclass(cls, owner) else None


def blocks_support(blocks: Any, layer: int | None = None) -> dict[str, Any]:
    """The block values of a block list, the way ``support`` reports them.

    With ``layer``, that block's values by dotted name (``"layer_output"``,
    ``"self_attn.attention_probabilities"``). Without, each value maps to None
    when available on every block, else ``{layer: reason}`` for the blocks
    where it is not.
    """
    if layer is not None:
        return _block_support(blocks[layer])
    rows = [_block_support(block) for block in blocks]
    names = list(dict.fromkeys(name for row in rows for name in row))
    table: dict[str, Any] = {}
    for name in names:
        missing = f"no {name.split('.')[0]} module on this block"
        reasons = {
            index: row.get(name, missing) for index, row in enumerate(rows) if row.get(name, missing) is not None
        }
        table[name] = reasons or None
    return table


def _block_support(block: Any) -> dict[str, str | None]:
    rows: dict[str, str | None] = {}
    if isinstance(block, Standard):
        rows.update(block.support())
    for child_name in ("self_attn", "linear_attn", "mlp"):
        child = block.__dict__.get(child_name)
        if isinstance(child, Standard):
            rows.update({f"{child_name}.{name}": reason for name, reason in child.support().items()})
    return rows
