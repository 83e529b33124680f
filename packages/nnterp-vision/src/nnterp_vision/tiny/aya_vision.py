"""Aya Vision's tiny checkpoint: a SigLIP tower, a Cohere2 text model, and the Aya Vision processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig
from .sizes import SIGLIP as SHARED_SIGLIP
from .sizes import TEXT

#: the processor's tokens, added in this order after the tokenizer's 300 entries: the first is the image token
AYA_TOKENS = ("<|IMG_PATCH|>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_LINE_BREAK|>", "TILE", "TILE_GLOBAL")
#: a Cohere2 text model (one sliding and one full layer); its logit_scale away from the default, so a projection that
#: forgets Aya Vision's scale (or adds it to Command A Vision's logits) cannot pass
COHERE2 = {
    **TEXT,
    "model_type": "cohere2",
    "logit_scale": 0.3,
    "sliding_window": 4,
    "layer_types": ["sliding_attention", "full_attention"],
}
#: a SigLIP tower on 16-pixel tiles in 4-pixel patches: 16 patches (4 x 4), no class row, no pooling head
SIGLIP = {**SHARED_SIGLIP, "image_size": 16, "patch_size": 4}


@dataclass(frozen=True)
class AyaVisionTinyConfig(VisionTinyConfig):
    """Aya Vision's processor: each image cut into tiles of the tower's size plus a global thumbnail, ``(side // (patch * downsample)) ** 2`` tokens each.

    The prompt's ``<image>`` becomes ``<|START_OF_IMG|>``, then per tile
    ``TILE_<i>`` and its ``<|IMG_PATCH|>`` tokens, then ``TILE_GLOBAL`` and
    the thumbnail's, then ``<|END_OF_IMG|>``; the image processor crops to at
    most ``max_tiles`` tiles (a lone tile has no thumbnail).
    """

    #: the most tiles an image is cut into, the thumbnail aside
    max_tiles: int = 4

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Aya Vision processor: ``tokenizer`` with its image tokens, a tiling image processor sized to the tower."""
        from transformers.models.aya_vision.processing_aya_vision import AyaVisionProcessor
        from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

        tokenizer.add_special_tokens({"additional_special_tokens": list(AYA_TOKENS)})
        token = tokenizer.convert_tokens_to_ids(AYA_TOKENS[0])
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        side = config.vision_config.image_size
        images = GotOcr2ImageProcessorPil(
            size={"height": side, "width": side}, crop_to_patches=True, min_patches=1, max_patches=self.max_tiles
        )
        processor = AyaVisionProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=config.vision_config.patch_size,
            downsample_factor=config.downsample_factor,
            img_size=side,
        )
        processor.save_pretrained(directory)


#: the image token follows the tokenizer's 300 entries; 16 patches a tile, pixel-shuffled by 2 into 4 image tokens
TINY = AyaVisionTinyConfig(
    "aya_vision",
    {"text_config": COHERE2, "vision_config": SIGLIP, "image_token_index": 300, "downsample_factor": 2},
    load={"attn_implementation": "eager"},
)
