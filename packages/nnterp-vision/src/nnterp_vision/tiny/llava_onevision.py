"""LLaVA-OneVision's tiny checkpoint: a SigLIP tower, a Qwen2 text model, and the OneVision processor tiling on the tower's grid.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_VIDEO_FIELDS, VisionTinyConfig, add_tokens
from .sizes import QWEN2, SIGLIP


@dataclass(frozen=True)
class LlavaOnevisionTinyConfig(VisionTinyConfig):
    """LLaVA-OneVision's processor: a lone image in its prompt is a base crop and anyres tiles; several in one prompt are a base crop each.

    The image processor resizes the whole image to the tower's square (the
    base crop) and, for a prompt holding one image, tiles it on the best of
    the config's ``image_grid_pinpoints``; the processor counts the tokens
    the wrapper's unpadding and newline rows leave. The processor requires a
    video processor (``LlavaOnevisionVideoProcessor``, no torchvision needed); no video is ever traced.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the OneVision processor: ``tokenizer`` with the image and video tokens, an anyres image processor sized to the tower."""
        from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
            LlavaOnevisionImageProcessorPil,
        )
        from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor
        from transformers.models.llava_onevision.video_processing_llava_onevision import LlavaOnevisionVideoProcessor

        add_tokens(self.model_type, tokenizer, config, IMAGE_VIDEO_FIELDS)
        vision = config.vision_config
        side = vision.image_size
        images = LlavaOnevisionImageProcessorPil(
            size={"height": side, "width": side},
            image_grid_pinpoints=[list(pinpoint) for pinpoint in config.image_grid_pinpoints],
        )
        videos = LlavaOnevisionVideoProcessor(size={"height": side, "width": side})
        processor = LlavaOnevisionProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            video_processor=videos,
            num_image_tokens=(side // vision.patch_size) ** 2,
            vision_feature_select_strategy=config.vision_feature_select_strategy,
            vision_aspect_ratio=config.vision_aspect_ratio,
        )
        processor.save_pretrained(directory)


#: the image token follows the tokenizer's 300 entries, the video token after it; the checks' image: a base crop and 2 x 2 tiles
TINY = LlavaOnevisionTinyConfig(
    "llava_onevision",
    {
        "text_config": QWEN2,
        "vision_config": SIGLIP,
        "image_token_id": 300,
        "video_token_id": 301,
        "image_grid_pinpoints": [[32, 64], [64, 32], [64, 64]],
    },
    load={"attn_implementation": "eager"},
)
