"""VipLLaVA's tiny checkpoint: LLaVA's processor, with the class row dropped though the config names no strategy.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, VisionTinyConfig


@dataclass(frozen=True)
class VipLlavaTinyConfig(VisionTinyConfig):
    """A VipLLaVA checkpoint, saved with a ``LlavaProcessor``.

    ``VipLlavaConfig`` has no ``vision_feature_select_strategy``: the model
    always drops CLIP's class row from every selected layer, which is the
    processor's ``"default"`` strategy.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LLaVA processor: ``tokenizer`` with the image token, and an image processor sized to the tower."""
        from transformers import CLIPImageProcessor, LlavaProcessor

        tokenizer.add_tokens([IMAGE_TOKEN], special_tokens=True)
        token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side = vision.image_size
        images = CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
        processor = LlavaProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            vision_feature_select_strategy="default",  # VipLlavaModel drops the class row
            num_additional_image_tokens=1,  # CLIP's class row
            image_token=IMAGE_TOKEN,
        )
        processor.save_pretrained(directory)
