"""Janus's tiny checkpoint: a Janus tower, a Llama text model, a small VQ-VAE, and the Janus processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from . import IMAGE_TOKEN
from .deepseek_vl import DeepseekVLTinyConfig
from .sizes import TEXT

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
class JanusTinyConfig(DeepseekVLTinyConfig):
    """Janus's processor: each placeholder becomes ``<begin_of_image>``, ``num_image_tokens`` image tokens, ``<end_of_image>``."""

    named_tokens: ClassVar[dict[str, str]] = {"image_token": IMAGE_TOKEN, "boi_token": BOI, "eoi_token": EOI}
    prefix: ClassVar[str] = "Janus"


#: the image token is id 300; 16 image tokens per image, between the begin and end tokens (301, 302)
TINY = JanusTinyConfig(
    "janus",
    {"text_config": TEXT, "vision_config": JANUS_VISION, "vq_config": VQ, "image_token_id": 300},
    load={"attn_implementation": "eager"},
)
