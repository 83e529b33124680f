"""The tiny checkpoint of a Pixtral-tower wrapper (Mistral 3, LLaVA on Pixtral): a Pixtral processor sized to its tower.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig, check_token_ids

#: the processor's tokens, in the order the tokenizer gains them: the first is the image token
PIXTRAL_TOKENS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")


@dataclass(frozen=True)
class PixtralTinyConfig(VisionTinyConfig):
    """A ``VisionTinyConfig`` whose processor is Pixtral's.

    The tokenizer gains ``[IMG]``, ``[IMG_BREAK]`` and ``[IMG_END]`` (``[IMG]``'s
    id must be the config's ``image_token_id``); the image processor resizes
    each image's longest side to at most the tower's ``image_size``, keeping its
    aspect ratio, to a multiple of ``patch_size * spatial_merge_size``.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Pixtral processor: ``tokenizer`` with the image tokens, and an image processor sized to the tower."""
        from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil
        from transformers.models.pixtral.processing_pixtral import (
            PixtralProcessor,  # the lazy name is a stub without torchvision
        )

        tokenizer.add_tokens(list(PIXTRAL_TOKENS), special_tokens=True)
        check_token_ids(self.model_type, tokenizer, config, {PIXTRAL_TOKENS[0]: "image_token_id"})
        vision = config.vision_config
        merge = getattr(config, "spatial_merge_size", 1)
        unit = vision.patch_size * merge
        images = PixtralImageProcessorPil(
            size={"longest_edge": vision.image_size}, patch_size={"height": unit, "width": unit}
        )
        processor = PixtralProcessor(
            image_processor=images, tokenizer=tokenizer, patch_size=vision.patch_size, spatial_merge_size=merge
        )
        processor.save_pretrained(directory)
