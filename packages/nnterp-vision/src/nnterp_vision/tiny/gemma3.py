"""Gemma 3's tiny checkpoint: a SigLIP tower pooled to a few tokens per image, a Gemma 3 text model, and its processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig
from .sizes import SIGLIP, TEXT

#: the processor's three tokens: the prompt's placeholder (begin-of-image), the end, and the image tokens between them
BOI, EOI, IMAGE = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
#: a Gemma 3 text model (one sliding and one full layer)
GEMMA3 = {**TEXT, "model_type": "gemma3_text", "sliding_window": 8}


@dataclass(frozen=True)
class Gemma3TinyConfig(VisionTinyConfig):
    """Gemma 3's processor: the prompt's ``<start_of_image>`` becomes the image's ``mm_tokens_per_image`` tokens between begin and end."""

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Gemma 3 processor: ``tokenizer`` with the three image tokens, and an image processor sized to the tower."""
        from transformers import Gemma3ImageProcessor, Gemma3Processor

        tokenizer.add_special_tokens({"additional_special_tokens": [BOI, EOI, IMAGE]})
        tokenizer.save_pretrained(directory)
        # reloaded to name them: the processor reads tokenizer.boi_token, eoi_token and image_token (and their ids)
        named = {"boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE}
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens=named)
        ids = [tokenizer.convert_tokens_to_ids(token) for token in (BOI, EOI, IMAGE)]
        if ids != [config.boi_token_id, config.eoi_token_id, config.image_token_id]:
            raise ValueError(f"{self.model_type}: the image tokens are ids {ids}; the config says otherwise")
        side = config.vision_config.image_size
        images = Gemma3ImageProcessor(size={"height": side, "width": side})
        processor = Gemma3Processor(
            image_processor=images, tokenizer=tokenizer, image_seq_length=config.mm_tokens_per_image
        )
        processor.save_pretrained(directory)


#: the image tokens follow the tokenizer's 300 entries; the 4 x 4 patches pooled 2 x 2, so 4 image tokens per image
TINY = Gemma3TinyConfig(
    "gemma3",
    {
        "text_config": GEMMA3,
        "vision_config": SIGLIP,
        "mm_tokens_per_image": 4,
        "boi_token_index": 300,
        "eoi_token_index": 301,
        "image_token_index": 302,
    },
    load={"attn_implementation": "eager"},
)
