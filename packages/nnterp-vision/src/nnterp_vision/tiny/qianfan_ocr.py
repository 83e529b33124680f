"""Qianfan-OCR's tiny checkpoint: InternVL's, on a Qwen3 text model, with Qianfan-OCR's processor (no video processor).

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .internvl import INTERNVIT, INTERNVL_TOKENS, QWEN2, InternVLTinyConfig


@dataclass(frozen=True)
class QianfanOCRTinyConfig(InternVLTinyConfig):
    """InternVL's tiling processor under Qianfan-OCR's class.

    Qianfan-OCR's processor expands ``image_placeholder_token`` (``<image>``,
    as on the real checkpoints) into ``<IMG_CONTEXT>`` tokens, its ``image_token``.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Qianfan-OCR processor: ``tokenizer`` naming its image tokens, a tiling image processor sized to the tower."""
        from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil
        from transformers.models.qianfan_ocr.processing_qianfan_ocr import QianfanOCRProcessor

        tokenizer.add_special_tokens({"additional_special_tokens": list(INTERNVL_TOKENS.values())})
        tokenizer.save_pretrained(directory)
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens=INTERNVL_TOKENS)
        if tokenizer.context_image_token_id != config.image_token_id:
            raise ValueError(f"{self.model_type}: the image token is id {tokenizer.context_image_token_id}; the config says {config.image_token_id}")
        vision = config.vision_config
        side, patch = vision.image_size[0], vision.patch_size[0]
        images = GotOcr2ImageProcessorPil(
            size={"height": side, "width": side}, crop_to_patches=True, min_patches=1, max_patches=self.max_tiles
        )
        seq = int((side // patch) ** 2 * config.downsample_ratio**2)
        QianfanOCRProcessor(
            image_processor=images, tokenizer=tokenizer, image_seq_length=seq
        ).save_pretrained(directory)


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
