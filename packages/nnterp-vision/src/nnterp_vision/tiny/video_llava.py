"""Video-LLaVA's tiny checkpoint: the Video-LLaVA processor sized to its CLIP towers.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, IMAGE_VIDEO_FIELDS, VIDEO_TOKEN, VisionTinyConfig, add_tokens


@dataclass(frozen=True)
class VideoLlavaTinyConfig(VisionTinyConfig):
    """Video-LLaVA's processor: an image becomes one token per patch (the class row dropped, the ``"default"`` strategy).

    It holds an image processor (CLIP's resize and crop to the tower's
    square) and a video processor (needs torchvision; no video is traced).
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Video-LLaVA processor: ``tokenizer`` with the image and video tokens, image and video processors sized to the tower."""
        from transformers import VideoLlavaImageProcessor, VideoLlavaProcessor, VideoLlavaVideoProcessor

        add_tokens(self.model_type, tokenizer, config, IMAGE_VIDEO_FIELDS)
        vision = config.vision_config
        side = vision.image_size
        square: dict[str, Any] = {"size": {"shortest_edge": side}, "crop_size": {"height": side, "width": side}}
        processor = VideoLlavaProcessor(
            image_processor=VideoLlavaImageProcessor(**square),
            video_processor=VideoLlavaVideoProcessor(**square),
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            vision_feature_select_strategy=config.vision_feature_select_strategy,
            num_additional_image_tokens=1,  # CLIP's class row
            image_token=IMAGE_TOKEN,
            video_token=VIDEO_TOKEN,
        )
        processor.save_pretrained(directory)
