"""A text component's values, read the same way on a tower: laid out over patches, and unavailable without an image."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nnterp.descriptors import EProperty, redefine

from .availability import or_no_images


def relaid(value: EProperty, layout: Any = None) -> EProperty:
    """``value`` at its own path, unavailable when no image reaches the model, with ``layout`` as its shape when given."""
    relayout = {} if layout is None else {"layout": layout}
    return value.evolve(unavailable=or_no_images(value._unavailable), **relayout)


def each_value(names: dict[str, Any]) -> Callable[[type], type]:
    """A class decorator: each inherited value of ``names`` relaid (``name -> layout``, None to keep the base's)."""

    def decorate(cls: type) -> type:
        return redefine(cls, **{name: relaid(getattr(cls.__mro__[1], name), layout) for name, layout in names.items()})

    return decorate
