"""Idefics2's tiny checkpoint: an Idefics2 ViT, a perceiver resampler, a Mistral text model, and the Idefics2 processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig
from .sizes import TEXT, TOWER

#: the resampler: 4 latents per image through 2 blocks, at the text width (grouped-query, 4 heads of 16 over 2 key heads)
PERCEIVER = {
    "hidden_size": 64,
    "resampler_n_latents": 4,
    "resampler_depth": 2,
    "resampler_n_heads": 4,
    "resampler_head_dim": 16,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
}


@dataclass(frozen=True)
class Idefics2TinyConfig(VisionTinyConfig):
    """The Idefics2 processor, no image splitting: every image resized to the tower's square, ``resampler_n_latents`` tokens each.

    The processor adds ``<fake_token_around_image>``, ``<image>`` and
    ``<end_of_utterance>`` to the tokenizer itself, in that order after its
    300 entries, so ``<image>`` is id 301.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Idefics2 processor: an image processor to the tower's square, ``image_seq_len`` the resampler's latents."""
        from transformers import Idefics2ImageProcessor, Idefics2Processor

        side = config.vision_config.image_size
        images = Idefics2ImageProcessor(do_image_splitting=False, size={"height": side, "width": side})
        processor = Idefics2Processor(
            image_processor=images, tokenizer=tokenizer, image_seq_len=config.perceiver_config.resampler_n_latents
        )
        if processor.image_token_id != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {processor.image_token_id}; the config says {config.image_token_id}"
            )
        processor.save_pretrained(directory)


#: nested text config declared through AutoConfig: given whole, Mistral's; 16 patches (no class row), 4 image tokens
TINY = Idefics2TinyConfig(
    "idefics2",
    {
        "text_config": {**TEXT, "model_type": "mistral"},
        "vision_config": TOWER,
        "perceiver_config": PERCEIVER,
        "image_token_id": 301,
    },
    load={"attn_implementation": "eager"},
)
