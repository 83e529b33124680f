"""Command A Vision's (``cohere2_vision``) tiny checkpoint: Aya Vision's SigLIP tower and Cohere2 text model, its own processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig
from .aya_vision import COHERE2, SIGLIP

#: the processor's tokens, added in this order after the tokenizer's 300 entries, and the tokenizer attributes that name them
COHERE2_VISION_TOKENS = {
    "image_token": "<|IMG_PATCH|>",
    "boi_token": "<|START_OF_IMG|>",
    "eoi_token": "<|END_OF_IMG|>",
    "img_line_break_token": "<|IMG_LINE_BREAK|>",
}


@dataclass(frozen=True)
class Cohere2VisionTinyConfig(VisionTinyConfig):
    """Command A Vision's processor: each image cut into at most ``max_tiles`` tiles of the tower's size, plus a thumbnail.

    The prompt's ``<|IMG_PATCH|>`` becomes ``<|START_OF_IMG|>``, then per
    crop (tiles, then the thumbnail; a lone tile has none)
    ``(side // (patch * downsample)) ** 2`` ``<|IMG_PATCH|>`` tokens and an
    ``<|IMG_LINE_BREAK|>``, then ``<|END_OF_IMG|>``. The image processor's
    ``patch_size`` is a crop's image tokens a side, not pixels; it needs torchvision.
    """

    #: the most tiles an image is cut into, the thumbnail aside
    max_tiles: int = 4

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Command A Vision processor: ``tokenizer`` naming its image tokens, a tiling image processor sized to the tower."""
        from transformers.models.cohere2_vision.image_processing_cohere2_vision import (
            Cohere2VisionImageProcessor,  # torchvision
        )
        from transformers.models.cohere2_vision.processing_cohere2_vision import Cohere2VisionProcessor

        tokenizer.add_special_tokens({"additional_special_tokens": list(COHERE2_VISION_TOKENS.values())})
        tokenizer.save_pretrained(directory)
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens=COHERE2_VISION_TOKENS)
        if tokenizer.image_token_id != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {tokenizer.image_token_id}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side = vision.image_size
        images = Cohere2VisionImageProcessor(
            size={"height": side, "width": side},
            crop_to_patches=True,
            min_patches=1,
            max_patches=self.max_tiles,
            patch_size=side // (vision.patch_size * config.downsample_factor),  # type: ignore[call-arg]  # a field transformers' kwargs TypedDict omits
        )
        Cohere2VisionProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(directory)


#: the image token follows the tokenizer's 300 entries; 16 patches a crop, pixel-shuffled by 2 into 4 image tokens
TINY = Cohere2VisionTinyConfig(
    "cohere2_vision",
    {
        "text_config": COHERE2,
        "vision_config": SIGLIP,
        "image_token_id": 300,
        "downsample_factor": 2,
        "alignment_intermediate_size": 128,
    },
    load={"attn_implementation": "eager"},
)
