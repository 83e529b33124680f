"""Llama 4's tiny checkpoint: a Llama 4 ViT (pixel shuffle inside), a Llama 4 text model, and the Llama 4 processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig, check_token_ids

#: the processor's tokens, added in this order after the tokenizer's 300 entries (``<|patch|>`` receives the features)
TOKENS = ("<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>", "<|tile_x_separator|>", "<|tile_y_separator|>")
#: a Llama 4 tower on 32-pixel images in 8-pixel patches: 16 patches and a class row (last), shuffled by 0.5 into 4 tokens
LLAMA4_VISION = {
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 64,
    "projector_output_dim": 64,
    "vision_output_dim": 64,
}


@dataclass(frozen=True)
class Llama4TinyConfig(VisionTinyConfig):
    """The Llama 4 processor: ``<|image_start|>``, one ``<|patch|>`` per image token, ``<|image_end|>``; one tile per image.

    ``Llama4ImageProcessor`` has only a torchvision backend, so writing the
    processor needs torchvision installed.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Llama 4 processor, its tokens at fixed ids, its image processor sized to the tower (one tile)."""
        tokenizer.add_special_tokens({"additional_special_tokens": list(TOKENS)})
        fields = {"<|image_start|>": "boi_token_id", "<|image_end|>": "eoi_token_id", "<|patch|>": "image_token_id"}
        check_token_ids(self.model_type, tokenizer, config, fields)
        from transformers import Llama4ImageProcessor, Llama4Processor  # torchvision, through the image processor

        vision = config.vision_config
        side = vision.image_size
        images = Llama4ImageProcessor(size={"height": side, "width": side}, max_patches=1, resize_to_max_canvas=False)
        processor = Llama4Processor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            pixel_shuffle_ratio=vision.pixel_shuffle_ratio,
        )
        processor.save_pretrained(directory)


TINY = Llama4TinyConfig(
    "llama4",
    {"vision_config": LLAMA4_VISION, "boi_token_index": 300, "eoi_token_index": 301, "image_token_index": 303},
    load={"attn_implementation": "eager"},
)
