"""A text component's values, read the same way on a tower: laid out over patches, and unavailable without an image."""

from __future__ import annotations

from typing import Any, Callable

from nnterp.descriptors import EProperty

from .availability import or_no_images


def relaid(value: EProperty, layout: Any = None) -> EProperty:
    """``value`` at its own path, unavailable when no image reaches the model, with ``layout`` as its shape when given."""
    moved = value.at(unavailable=or_no_images(value._unavailable))
    if layout is not None:
        base = value._preprocess

        def read(envoy: Any, served: Any) -> Any:
            return base(envoy, served) if base is not None else served

        read.__annotations__ = {"return": layout}
        moved._preprocess = read
    return moved


def each_value(names: dict[str, Any]) -> Callable[[type], type]:
    """A class decorator: each inherited value of ``names`` relaid (``name -> layout``, None to keep the base's)."""

    def decorate(cls: type) -> type:
        for name, layout in names.items():
            value = relaid(getattr(cls.__mro__[1], name), layout)
            setattr(cls, name, value)
            value.__set_name__(cls, name)
        return cls

    return decorate
