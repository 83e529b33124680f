"""Where a dictionary sits on a model: its sites as standard names, checked against the values' layouts and widths."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import layouts
from ...descriptors import declared_values
from ...errors import InvalidArgument
from ...protocols import StandardModel
from ..cache import _host, expand_names

if TYPE_CHECKING:
    from .dictionary import Dictionary


def standard_site(model: StandardModel, name: str) -> str:
    """A site as one standard name: standard names as they are, TransformerLens names through ``names.standard_name``."""
    root = name.split(".", 1)[0]
    if root != "layers" and name not in declared_values(type(model)):
        try:
            from ..names import standard_name
        except ImportError:
            raise ValueError(
                f"{name!r} is no standard name, and nnterp.toolkit.names (which translates TransformerLens hook names) "
                "is not installed: give the site as a standard name, e.g. 'layers.3.layer_input'"
            ) from None
        name = standard_name(model, name)
    expanded = expand_names(model, name)  # KeyError / Unavailable for a value the model lacks
    if len(expanded) != 1:
        raise ValueError(f"{name!r} names {len(expanded)} values; a dictionary reads one (no '*')")
    return expanded[0]


def check_site(model: StandardModel, dictionary: Dictionary, site: str, axis: str, role: str, function: str) -> None:
    """The value at ``site`` is ``[batch, seq, width]``, ``width`` the dictionary's ``axis`` (``d_in``, ``d_out``)."""
    host, value = _host(model, site)
    layout = getattr(type(host), value).layout
    if layout is None:
        return
    width = getattr(dictionary, axis)
    dims = layouts.dims(layout)
    shape = layouts.expected_shape(host, layout, None)
    if dims[:2] != (layouts.BATCH, layouts.SEQ) or len(dims) != 3:
        raise InvalidArgument(
            function,
            "dictionary",
            dictionary,
            f"the dictionary {role} {site}, laid out [{', '.join(dims)}]; a dictionary {role} [batch, seq, {axis}] values",
            f"give {role}= a value laid out [batch, seq, width]",
        )
    if shape[-1] is not None and shape[-1] != width:
        raise InvalidArgument(
            function,
            "dictionary",
            dictionary,
            f"the dictionary {role} {site}, which is {dims[-1]}={shape[-1]} wide on this model, but its {axis} is {width}",
            "load the dictionary trained on this model's value",
        )


# -- inside a trace ----------------------------------------------------------------
