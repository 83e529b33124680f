"""LLaVA-NeXT-Video's tiny checkpoint: LLaVA-NeXT's, saved with the LLaVA-NeXT-Video processor (its video processor besides).

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_VIDEO_FIELDS, add_tokens
from .llava_next import LlavaNextTinyConfig


@dataclass(frozen=True)
class LlavaNextVideoTinyConfig(LlavaNextTinyConfig):
    """A LLaVA-NeXT-Video checkpoint: LLaVA-NeXT's anyres image processor, a video processor no trace uses, and both tokens.

    The processor counts an image's tokens as LLaVA-NeXT's does (the class
    row dropped, the unpadded grid with its newline rows); its video
    processor needs no torchvision.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LLaVA-NeXT-Video processor: ``tokenizer`` with the image and video tokens, an anyres image processor."""
        from transformers.models.llava_next_video.processing_llava_next_video import LlavaNextVideoProcessor
        from transformers.models.llava_next_video.video_processing_llava_next_video import LlavaNextVideoVideoProcessor

        add_tokens(self.model_type, tokenizer, config, IMAGE_VIDEO_FIELDS)
        vision = config.vision_config
        side = vision.image_size
        videos = LlavaNextVideoVideoProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
        processor = LlavaNextVideoProcessor(
            video_processor=videos,
            image_processor=self.image_processor(config),
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            vision_feature_select_strategy=config.vision_feature_select_strategy,
            num_additional_image_tokens=1,  # CLIP's class row
        )
        processor.save_pretrained(directory)
