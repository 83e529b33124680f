"""LLaVA-NeXT's tiny checkpoint: a ``VisionTinyConfig`` whose processor tiles the image (anyres) on the tiny tower's grid.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, VisionTinyConfig


@dataclass(frozen=True)
class LlavaNextTinyConfig(VisionTinyConfig):
    """A LLaVA-NeXT checkpoint, saved with a ``LlavaNextProcessor``.

    The image processor resizes the whole image to the tower's ``image_size``
    (the base crop) and tiles it on the best of the config's
    ``image_grid_pinpoints`` (multiples of ``image_size``), one crop per tile,
    so the tower runs on ``1 + tiles`` crops per image; the processor counts
    the image tokens the wrapper's unpadding and newline rows leave.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LLaVA-NeXT processor: ``tokenizer`` with the image token, an anyres image processor sized to the tower."""
        from transformers import LlavaNextImageProcessor, LlavaNextProcessor

        tokenizer.add_tokens([IMAGE_TOKEN], special_tokens=True)
        token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side = vision.image_size
        images = LlavaNextImageProcessor(
            size={"shortest_edge": side},
            crop_size={"height": side, "width": side},
            image_grid_pinpoints=[list(pinpoint) for pinpoint in config.image_grid_pinpoints],
        )
        processor = LlavaNextProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            vision_feature_select_strategy=config.vision_feature_select_strategy,
            num_additional_image_tokens=1,  # CLIP's class row
            image_token=IMAGE_TOKEN,
        )
        processor.save_pretrained(directory)
