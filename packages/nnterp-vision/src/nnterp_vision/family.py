"""A vision-language family: a ``Family`` loaded with its processor, whose root forward may scatter the image features."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from nnterp.family import Family


def forget_rope_deltas(model: Any) -> None:
    """Drop the rotary offsets a Qwen-VL-style wrapper kept from the last prompt (``rope_deltas``).

    The wrapper computes its 3D rotary offsets at an image prompt and keeps
    them on the module for the decode steps that follow; a text-only prompt
    does not replace them, so a call continuing it over its cache would take
    the offsets of an earlier image (of another batch size, even). Core calls
    this before every call that continues no cache.
    """
    for module in model._module.modules():
        if getattr(module, "rope_deltas", None) is not None:
            module.rope_deltas = None


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class VisionFamily(Family):
    """A wrapper of a vision tower, a projector and a text model: images reach it through its processor."""

    task: str = "image-text-to-text"
    on_fresh_call: Callable[[Any], None] | None = forget_rope_deltas
    #: where the root forward itself scatters the image features (Llama 4 has no inner model): the operation
    #: of its forward, as ``.source`` names it; None where an inner model keyed as ``ImageScatter`` does
    root_scatter: str | None = None
    #: which argument of ``root_scatter`` receives the features
    root_scatter_argument: int = 1

    def built(self, model: Any) -> None:
        """Instrument the root's forward where it scatters the features: it is already running when the tower's values are read."""
        if self.root_scatter is not None:
            from nnsight.intervention.source import install_source

            install_source(model)
