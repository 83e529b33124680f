"""LLaVA-NeXT's tiny checkpoint: a ``VisionTinyConfig`` whose processor tiles the image (anyres) on the tiny tower's grid.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import VisionTinyConfig


@dataclass(frozen=True)
class LlavaNextTinyConfig(VisionTinyConfig):
    """A LLaVA-NeXT checkpoint, saved with a ``LlavaNextProcessor``.

    The image processor resizes the whole image to the tower's ``image_size``
    (the base crop) and tiles it on the best of the config's
    ``image_grid_pinpoints`` (multiples of ``image_size``), one crop per tile,
    so the tower runs on ``1 + tiles`` crops per image; the processor counts
    the image tokens the wrapper's unpadding and newline rows leave.
    """

    processor_class = "LlavaNextProcessor"

    def image_processor(self, config: Any) -> Any:
        """An anyres image processor: the base crop at the tower's ``image_size``, tiles on ``image_grid_pinpoints``."""
        from transformers import LlavaNextImageProcessor

        side = config.vision_config.image_size
        return LlavaNextImageProcessor(
            size={"shortest_edge": side},
            crop_size={"height": side, "width": side},
            image_grid_pinpoints=[list(pinpoint) for pinpoint in config.image_grid_pinpoints],
        )
