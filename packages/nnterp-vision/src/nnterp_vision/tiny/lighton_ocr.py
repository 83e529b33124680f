"""LightOnOCR's tiny checkpoint: a Pixtral tower, a Qwen3 text model, and the LightOnOCR processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig

#: the processor's tokens, added in this order after the tokenizer's 300 entries, and the tokenizer attributes that name them
LIGHTON_TOKENS = {
    "image_token": "<|image_pad|>",
    "image_break_token": "<|vision_pad|>",
    "image_end_token": "<|vision_end|>",
}


@dataclass(frozen=True)
class LightOnOcrTinyConfig(VisionTinyConfig):
    """LightOnOCR's processor: Pixtral's image processor, and one ``<|image_pad|>`` per merged image token (no break tokens).

    The image processor resizes each image's longest side to at most the
    tower's ``image_size``, keeping its aspect ratio, to a multiple of
    ``patch_size * spatial_merge_size``; the processor reads its three tokens
    off the tokenizer's attributes, so the tokenizer is saved and reloaded naming them.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LightOnOCR processor: ``tokenizer`` naming its image tokens, a Pixtral image processor sized to the tower."""
        from transformers.models.lighton_ocr.processing_lighton_ocr import LightOnOcrProcessor
        from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

        tokenizer.add_special_tokens({"additional_special_tokens": list(LIGHTON_TOKENS.values())})
        tokenizer.save_pretrained(directory)
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens=LIGHTON_TOKENS)
        if tokenizer.image_token_id != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {tokenizer.image_token_id}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        unit = vision.patch_size * config.spatial_merge_size
        images = PixtralImageProcessorPil(
            size={"longest_edge": vision.image_size}, patch_size={"height": unit, "width": unit}
        )
        processor = LightOnOcrProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            spatial_merge_size=config.spatial_merge_size,
        )
        processor.save_pretrained(directory)
