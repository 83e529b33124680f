"""InternVL's tiny checkpoint: an InternViT tower, a Qwen2 text model, and the InternVL processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig, with_named_tokens
from .sizes import QWEN2

#: the processor's tokens, added in this order after the tokenizer's 300 entries, and the tokenizer attributes that name them
INTERNVL_TOKENS = {
    "context_image_token": "<IMG_CONTEXT>",
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "video_token": "<video>",
}
#: an InternViT on 16-pixel tiles in 4-pixel patches: 16 patches (4 x 4) and a class row, layer-scaled blocks
INTERNVIT = {
    "model_type": "internvl_vision",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 16,
    "patch_size": 4,
}


@dataclass(frozen=True)
class InternVLTinyConfig(VisionTinyConfig):
    """InternVL's processor: each image cut into at most ``max_tiles`` tiles of the tower's size plus a thumbnail, ``image_seq_length`` tokens each.

    The prompt's ``<IMG_CONTEXT>`` becomes ``<img>``, ``image_seq_length``
    ``<IMG_CONTEXT>`` tokens per crop (tiles, then the thumbnail; a lone tile
    has none), and ``</img>``. The processor requires a video processor,
    which needs torchvision; no video is ever traced.
    """

    #: the most tiles an image is cut into, the thumbnail aside
    max_tiles: int = 4

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the processor: ``tokenizer`` naming its image tokens, a tiling image processor sized to the tower."""
        from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

        tokenizer = with_named_tokens(tokenizer, directory, INTERNVL_TOKENS)
        if tokenizer.context_image_token_id != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {tokenizer.context_image_token_id}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side, patch = vision.image_size[0], vision.patch_size[0]
        images = GotOcr2ImageProcessorPil(
            size={"height": side, "width": side}, crop_to_patches=True, min_patches=1, max_patches=self.max_tiles
        )
        seq = int((side // patch) ** 2 * config.downsample_ratio**2)
        self.processor(tokenizer, images, seq, side).save_pretrained(directory)

    def processor(self, tokenizer: Any, images: Any, seq: int, side: int) -> Any:
        """InternVL's processor over ``images``, ``seq`` image tokens a tile, with its video processor."""
        from transformers.models.internvl.processing_internvl import InternVLProcessor
        from transformers.models.internvl.video_processing_internvl import InternVLVideoProcessor  # needs torchvision

        videos = InternVLVideoProcessor(size={"height": side, "width": side})
        return InternVLProcessor(
            image_processor=images, tokenizer=tokenizer, video_processor=videos, image_seq_length=seq
        )


#: the image token follows the tokenizer's 300 entries; 16 patches a crop (the class row dropped), shuffled into 4 image tokens
TINY = InternVLTinyConfig(
    "internvl",
    {"text_config": QWEN2, "vision_config": INTERNVIT, "image_token_id": 300, "downsample_ratio": 0.5},
    load={"attn_implementation": "eager"},
)
