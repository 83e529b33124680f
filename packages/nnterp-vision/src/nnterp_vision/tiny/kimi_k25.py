"""Kimi-K2.5's tiny checkpoint: a MoonViT on 8-pixel patches, a DeepSeek-V3 text model, the Kimi-K2.5 processor sized to them.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig, add_tokens

#: the processor's tokens, in the order the tokenizer gains them, and the config fields naming their ids (after the 300 entries)
KIMI_TOKENS = {
    "<|media_pad|>": "image_token_id",
    "<|kimi_k25_video_placeholder|>": "video_token_id",
    "<|media_begin|>": "vision_start_token_id",
    "<|media_end|>": "vision_end_token_id",
}
KIMI_TOKEN_IDS = {field: 300 + index for index, field in enumerate(KIMI_TOKENS.values())}
#: DeepSeek-V3's text model, whole (the wrapper builds it through AutoConfig): latent attention, block 0 dense, then 4 experts
DEEPSEEK_V3_TEXT = {
    "model_type": "deepseek_v3",
    "vocab_size": 320,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "first_k_dense_replace": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "max_position_embeddings": 256,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "pad_token_id": 0,
}
#: a MoonViT 32 wide (2 heads of 16) on 8-pixel patches, a learned 6 x 6 position grid, 2 x 2 merge kernels
MOONVIT = {
    "model_type": "kimi_k25_vision",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "patch_size": 8,
    "pos_emb_height": 6,
    "pos_emb_width": 6,
    "pos_emb_time": 4,
    "merge_kernel_size": [2, 2],
}


@dataclass(frozen=True)
class KimiK25TinyConfig(VisionTinyConfig):
    """Kimi-K2.5's processor: each image padded to whole merge kernels, at most ``side`` patches a side, one token per kernel.

    The checks' 40 x 48 image (5 x 6 patches of 8) is padded to 48 x 48, a
    6 x 6 grid of patches, 9 image tokens. The processor requires its video
    processor; no video is ever traced.
    """

    #: the most patches on a side of an image
    side: int = 6

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Kimi-K2.5 processor: ``tokenizer`` with the media tokens, image and video processors sized to the tower."""
        from transformers.models.kimi_k25.image_processing_kimi_k25 import Kimi_K25ImageProcessor
        from transformers.models.kimi_k25.processing_kimi_k25 import Kimi_K25Processor
        from transformers.models.kimi_k25.video_processing_kimi_k25 import Kimi_K25VideoProcessor

        add_tokens(self.model_type, tokenizer, config, KIMI_TOKENS)
        vision = config.vision_config
        sizes = {"patch_size": vision.patch_size, "merge_size": vision.merge_kernel_size[0]}
        size = {"max_height": self.side, "max_width": self.side}
        Kimi_K25Processor(
            image_processor=Kimi_K25ImageProcessor(size=size, max_patches=self.side**2, **sizes),
            tokenizer=tokenizer,
            video_processor=Kimi_K25VideoProcessor(**sizes),
        ).save_pretrained(directory)


TINY = KimiK25TinyConfig(
    "kimi_k25",
    {"text_config": DEEPSEEK_V3_TEXT, "vision_config": MOONVIT, "projection_hidden_size": 32, **KIMI_TOKEN_IDS},
    load={"attn_implementation": "eager"},
)
