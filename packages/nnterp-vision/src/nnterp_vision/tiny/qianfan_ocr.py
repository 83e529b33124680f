"""Qianfan-OCR's tiny checkpoint: InternVL's, on a Qwen3 text model, with Qianfan-OCR's processor (no video processor).

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .internvl import INTERNVIT, QWEN2, InternVLTinyConfig


@dataclass(frozen=True)
class QianfanOCRTinyConfig(InternVLTinyConfig):
    """InternVL's tiling processor under Qianfan-OCR's class.

    Qianfan-OCR's processor expands ``image_placeholder_token`` (``<image>``,
    as on the real checkpoints) into ``<IMG_CONTEXT>`` tokens, its ``image_token``.
    """

    def processor(self, tokenizer: Any, images: Any, seq: int, side: int) -> Any:
        """Qianfan-OCR's processor over ``images``, ``seq`` image tokens a tile (no video processor)."""
        from transformers.models.qianfan_ocr.processing_qianfan_ocr import QianfanOCRProcessor

        return QianfanOCRProcessor(image_processor=images, tokenizer=tokenizer, image_seq_length=seq)


#: InternVL's tiny sizes: 16 patches a 16-pixel crop (the class row dropped), shuffled into 4 image tokens; a Qwen3 text model
TINY = QianfanOCRTinyConfig(
    "qianfan_ocr",
    {
        "text_config": {**QWEN2, "model_type": "qwen3"},
        "vision_config": {**INTERNVIT, "model_type": "qianfan_ocr_vision"},
        "image_token_id": 300,
        "downsample_ratio": 0.5,
    },
    load={"attn_implementation": "eager"},
)
