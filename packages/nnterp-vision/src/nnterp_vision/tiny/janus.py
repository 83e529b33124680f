"""Janus's tiny checkpoint: a Janus tower, a Llama text model, a small VQ-VAE, and the Janus processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, VisionTinyConfig
from .idefics3 import TEXT

#: the tokens around each image's, added after the image token
BOI, EOI = "<begin_of_image>", "<end_of_image>"
#: a Janus tower on 32-pixel images in 8-pixel patches: 16 patches, no class row; the aligner (depth 2) to the text width
JANUS_VISION = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
    "mlp_ratio": 2.0,
    "projection_dim": 64,
    "depth": 2,
    "num_image_tokens": 16,
}
#: the generation path's VQ-VAE, as small as its group norms (32 groups) allow; no trace runs it
VQ = {
    "embed_dim": 8,
    "num_embeddings": 64,
    "latent_channels": 32,
    "base_channels": 32,
    "channel_multiplier": [1, 1],
    "num_res_blocks": 1,
    "projection_dim": 64,
    "image_token_embed_dim": 64,
    "num_hidden_layers": 2,
}


@dataclass(frozen=True)
class JanusTinyConfig(VisionTinyConfig):
    """Janus's processor: each placeholder becomes ``<begin_of_image>``, ``num_image_tokens`` image tokens, ``<end_of_image>``."""

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Janus processor: ``tokenizer`` with the three image tokens named, and an image processor sized to the tower."""
        from transformers import JanusImageProcessor, JanusProcessor

        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN, BOI, EOI]})
        tokenizer.save_pretrained(directory)
        # reloaded to name them: the processor reads tokenizer.image_token, boi_token and eoi_token
        named = {"image_token": IMAGE_TOKEN, "boi_token": BOI, "eoi_token": EOI}
        tokenizer = type(tokenizer).from_pretrained(directory, extra_special_tokens=named)
        token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side = vision.image_size
        images = JanusImageProcessor(size={"height": side, "width": side})
        processor = JanusProcessor(
            image_processor=images, tokenizer=tokenizer, num_image_tokens=(side // vision.patch_size) ** 2
        )
        processor.save_pretrained(directory)


#: the image token is id 300; 16 image tokens per image, between the begin and end tokens (301, 302)
TINY = JanusTinyConfig(
    "janus",
    {"text_config": TEXT, "vision_config": JANUS_VISION, "vq_config": VQ, "image_token_id": 300},
    load={"attn_implementation": "eager"},
)
