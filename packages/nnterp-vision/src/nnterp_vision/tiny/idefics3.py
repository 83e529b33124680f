"""Idefics3's (and SmolVLM's) tiny checkpoint: an Idefics3 ViT, a Llama text model, and the Idefics3 processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, IMAGE_TOKEN_FIELD, VisionTinyConfig, check_token_ids
from .sizes import TEXT, TOWER

#: the tokens the processor wraps each image's with, added in this order after the tokenizer's 300 entries
FAKE_IMAGE_TOKEN = "<fake_token_around_image>"
END_OF_UTTERANCE = "<end_of_utterance>"
GLOBAL_IMAGE_TAG = "<global-img>"
#: an Idefics3 tower on 32-pixel images in 8-pixel patches: 16 patches, no class row
IDEFICS3_VISION = {"model_type": "idefics3_vision", **TOWER}


@dataclass(frozen=True)
class Idefics3TinyConfig(VisionTinyConfig):
    """The Idefics3 processor, no image splitting: every image resized to the tower's square, ``image_seq_len`` tokens each.

    The pixel shuffle folds each ``scale_factor`` square of patches into one
    token, so an image is ``(image_size // patch_size) ** 2 // scale_factor ** 2``
    image tokens, between ``<fake_token_around_image><global-img>`` and
    ``<fake_token_around_image>``.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Idefics3 processor (SmolVLM's too): the image tokens at fixed ids, an image processor sized to the tower."""
        from transformers import Idefics3ImageProcessor, Idefics3Processor

        tokenizer.add_special_tokens(
            {"additional_special_tokens": [FAKE_IMAGE_TOKEN, IMAGE_TOKEN, END_OF_UTTERANCE, GLOBAL_IMAGE_TAG]}
        )
        check_token_ids(self.model_type, tokenizer, config, IMAGE_TOKEN_FIELD)
        vision = config.vision_config
        side = vision.image_size
        images = Idefics3ImageProcessor(
            do_image_splitting=False, size={"longest_edge": side}, max_image_size={"longest_edge": side}
        )
        seq = (side // vision.patch_size) ** 2 // config.scale_factor**2
        # SmolVLM's own processor needs num2words and a torchvision video processor; Idefics3's writes the same
        # image prompt (no splitting: <fake_token_around_image><global-img>, image_seq_len <image>, <fake_token_around_image>)
        processor = Idefics3Processor(image_processor=images, tokenizer=tokenizer, image_seq_len=seq)
        processor.save_pretrained(directory)


#: the image token is id 301 (after the fake token); 4 image tokens per image, 16 patches pixel-shuffled by 2
TINY = Idefics3TinyConfig(
    "idefics3",
    {"text_config": TEXT, "vision_config": IDEFICS3_VISION, "image_token_id": 301, "scale_factor": 2},
    load={"attn_implementation": "eager"},
)
#: SmolVLM: Idefics3's modeling under its own names, the same tiny sizes
SMOLVLM = Idefics3TinyConfig(
    "smolvlm",
    {
        "text_config": TEXT,
        "vision_config": {**IDEFICS3_VISION, "model_type": "smolvlm_vision"},
        "image_token_id": 301,
        "scale_factor": 2,
    },
    load={"attn_implementation": "eager"},
)
