"""A list of blocks (``model.layers``, a tower's ``layers``): indexed as a list is, with the count in its IndexError."""

from __future__ import annotations

from typing import Any

from nnsight import Envoy

from .._spelling import spelled


class Blocks(Envoy):
    """The envoy of a block list. ``layers[99]`` on a three-block model is an ``IndexError`` saying there are three.

    nnsight indexes a list envoy by attribute name, so an index out of range
    would read as a missing attribute ``'99'``.
    """

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int) and not isinstance(key, bool) and hasattr(self._module, "__len__"):
            count = len(self._module)
            if not -count <= key < count:
                name = spelled(self)
                raise IndexError(
                    f"{name}[{key}] is out of range: {name} holds {count} blocks, {name}[0] to {name}[{count - 1}] "
                    f"(or {name}[-1] for the last)"
                )
            # what nnsight's Envoy.__getitem__ does with an int, the count already at hand (every read indexes)
            return getattr(self, str(key + count if key < 0 else key))
        return super().__getitem__(key)
