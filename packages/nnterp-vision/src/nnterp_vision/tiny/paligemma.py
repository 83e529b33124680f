"""PaliGemma's tiny checkpoint: a SigLIP tower, a Gemma text model, and the PaliGemma processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, VisionTinyConfig
from .sizes import SIGLIP, TEXT

#: the PaliGemma processor adds 1152 location and segmentation tokens after the image token: the vocabulary holds them
VOCAB = 1536
#: a Gemma text model, the checkpoint's (PaliGemma 1's) kind
GEMMA = {**TEXT, "model_type": "gemma", "vocab_size": VOCAB}


@dataclass(frozen=True)
class PaliGemmaTinyConfig(VisionTinyConfig):
    """PaliGemma's processor: ``image_seq_length`` image tokens, then BOS, the prompt and a newline; a SigLIP image processor."""

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the PaliGemma processor: ``tokenizer`` with the image token (and the processor's own extra tokens)."""
        from transformers import PaliGemmaProcessor, SiglipImageProcessor

        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
        token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        tokenizer.image_token, tokenizer.image_token_id = IMAGE_TOKEN, token
        vision = config.vision_config
        side = vision.image_size
        images = SiglipImageProcessor(size={"height": side, "width": side})
        images.image_seq_length = (side // vision.patch_size) ** 2  # type: ignore[attr-defined]  # PaliGemmaProcessor reads it; transformers declares it on no image processor
        processor = PaliGemmaProcessor(image_processor=images, tokenizer=tokenizer)
        if len(processor.tokenizer) > config.text_config.vocab_size:
            raise ValueError(f"{self.model_type}: the processor's tokenizer holds {len(processor.tokenizer)} tokens")
        processor.save_pretrained(directory)


#: the image token follows the tokenizer's 300 entries; 16 image tokens, one per patch
TINY = PaliGemmaTinyConfig(
    "paligemma",
    {
        "text_config": GEMMA,
        "vision_config": SIGLIP,
        "image_token_index": 300,
        "projection_dim": 64,
        "hidden_size": 64,
        "vocab_size": VOCAB,
    },
    load={"attn_implementation": "eager"},
)
