"""The tiny checkpoint of PaddleOCR-VL: its processor sized to the tower, the tokenizer naming its image token.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import add_tokens
from .qwen2_vl import QWEN_TOKEN_FIELDS, QwenVLTinyConfig

#: the processor's tokens and the config fields naming them (image, video, vision start, vision end: Qwen2-VL's fields)
PADDLE_TOKENS = dict(
    zip(("<|IMAGE_PLACEHOLDER|>", "<|video_pad|>", "<|IMAGE_START|>", "<|IMAGE_END|>"), QWEN_TOKEN_FIELDS)
)


@dataclass(frozen=True)
class PaddleOcrTinyConfig(QwenVLTinyConfig):
    """A ``QwenVLTinyConfig`` whose processor is PaddleOCR-VL's: patches one frame deep, the image token on the tokenizer.

    The processor reads ``tokenizer.image_token`` and ``image_token_id``, so
    the tokenizer is saved and reloaded naming it. The checks' 40 x 48 image
    is resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 6 image tokens.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the PaddleOCR-VL processor: ``tokenizer`` with the image tokens, and an image processor sized to the tower."""
        from transformers.models.paddleocr_vl.image_processing_pil_paddleocr_vl import PaddleOCRVLImageProcessorPil
        from transformers.models.paddleocr_vl.processing_paddleocr_vl import PaddleOCRVLProcessor

        add_tokens(self.model_type, tokenizer, config, PADDLE_TOKENS)
        tokenizer.save_pretrained(directory)
        image = next(iter(PADDLE_TOKENS))
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens={"image_token": image})
        fewest, most = self.pixels
        vision = config.vision_config
        images = PaddleOCRVLImageProcessorPil(
            size={"shortest_edge": fewest, "longest_edge": most},
            patch_size=vision.patch_size,
            temporal_patch_size=1,
            merge_size=vision.spatial_merge_size,
        )
        PaddleOCRVLProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(directory)


#: ERNIE-4.5's text model on 3D rotary positions: mrope_section sums to head_dim // 2
PADDLE_TEXT = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
#: a tower 32 wide (2 heads of 16) apart from the text's 64; the learned position grid is square, (32 / 8) ** 2 = 16
PADDLE_VIT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "patch_size": 8,
    "image_size": 32,
    "spatial_merge_size": 2,
}
#: the checks' image: 4 x 6 patches, merged 2 x 2 by the projector into 6 image tokens
TINY = PaddleOcrTinyConfig(
    "paddleocr_vl",
    {"text_config": PADDLE_TEXT, "vision_config": PADDLE_VIT, **dict(zip(QWEN_TOKEN_FIELDS, range(300, 304)))},
)
