"""DeepSeek-VL's tiny checkpoint: a SigLIP tower, a Llama text model, and the DeepSeek-VL processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, VisionTinyConfig
from .idefics3 import TEXT
from .paligemma import SIGLIP


@dataclass(frozen=True)
class DeepseekVLTinyConfig(VisionTinyConfig):
    """DeepSeek-VL's processor: each image placeholder becomes ``num_image_tokens`` image tokens, one per patch.

    The image processor resizes the longer side to the tower's ``image_size``
    and pads the other to a square; the processor reads its placeholder off
    the tokenizer's ``image_token``.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the DeepSeek-VL processor: ``tokenizer`` with the image token named, and an image processor sized to the tower."""
        from transformers import DeepseekVLImageProcessor, DeepseekVLProcessor

        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
        tokenizer.save_pretrained(directory)
        # reloaded to name it: the processor reads tokenizer.image_token
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens={"image_token": IMAGE_TOKEN})
        token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side = vision.image_size
        images = DeepseekVLImageProcessor(size={"height": side, "width": side})
        processor = DeepseekVLProcessor(
            image_processor=images, tokenizer=tokenizer, num_image_tokens=(side // vision.patch_size) ** 2
        )
        processor.save_pretrained(directory)


#: nested configs declared through AutoConfig are not shrunk: both given whole; 16 image tokens per image
TINY = DeepseekVLTinyConfig(
    "deepseek_vl",
    {"text_config": TEXT, "vision_config": SIGLIP, "image_token_id": 300},
    load={"attn_implementation": "eager"},
)
