"""Aria's tiny checkpoint: an Idefics3 tower on 490-pixel images, a learned-query projector, Aria's MoE text model, and the Aria processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig, with_named_tokens

#: the image placeholder; the tokenizer names it ``image_token``, as the Aria processor reads it
ARIA_IMAGE_TOKEN = "<|img|>"
#: the image side the Aria processor resizes to (490 or 980; its call defaults to 980 whatever the image processor says), the tiny patch
SIDE, PATCH = 980, 70
#: learned queries per image: the projector pools the (980 / 70) ** 2 = 196 patches into these many image tokens
QUERIES = 4


@dataclass(frozen=True)
class AriaTinyConfig(VisionTinyConfig):
    """The Aria processor: every image resized to 980 pixels (no splitting) and written as ``QUERIES`` image tokens."""

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Aria processor, the image token at the config's id, its image processor at 980 pixels."""
        from transformers.models.aria.image_processing_pil_aria import AriaImageProcessorPil
        from transformers.models.aria.processing_aria import AriaProcessor

        tokenizer = with_named_tokens(tokenizer, directory, {"image_token": ARIA_IMAGE_TOKEN})
        token = tokenizer.convert_tokens_to_ids(ARIA_IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        images = AriaImageProcessorPil(max_image_size=SIDE, min_image_size=SIDE, split_image=False)
        processor = AriaProcessor(image_processor=images, tokenizer=tokenizer, size_conversion={SIDE: QUERIES})
        processor.save_pretrained(directory)


#: the image token is id 300; the text model keeps Aria's mixture at the shrunk sizes
TINY = AriaTinyConfig(
    "aria",
    {
        "text_config": {"vocab_size": 320, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0},
        "vision_config": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": SIDE,
            "patch_size": PATCH,
        },
        "image_token_index": 300,
        "projector_patch_to_query_dict": {(SIDE // PATCH) ** 2: QUERIES},
    },
    load={"attn_implementation": "eager"},
)
