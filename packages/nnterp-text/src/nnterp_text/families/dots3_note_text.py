"""dots3 (text): latent attention, its width differing by layer, each head gated before ``o_proj``: served as Laguna is.

Its sparse blocks are DeepSeek-V3's mixture (sigmoid router, selection bias,
groups, shared experts), not Laguna's.
"""

from nnterp import SigmoidMoe, TinyConfig

from . import laguna

FAMILY = laguna.FAMILY.replace(
    name="dots3_note_text",
    model_types=("dots3_note_text",),
    envoys={**laguna.FAMILY.envoys, "layers.*.mlp": SigmoidMoe},
    # per-layer sizes: the third block is a sliding layer with two heads and values 8 wide
    tiny={
        "dots3_note_text": TinyConfig(
            "dots3_note_text",
            {
                "vocab_size": 320,
                "hidden_size": 64,
                "intermediate_size": 128,
                "moe_intermediate_size": 32,
                "shared_experts_intermediate_size": 32,
                "num_hidden_layers": 3,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "n_routed_experts": 4,
                "n_shared_experts": 1,
                "num_experts_per_tok": 2,
                "kv_lora_rank": 32,
                "q_lora_rank": 32,
                "qk_nope_head_dim": 16,
                "qk_rope_head_dim": 8,
                "v_head_dim": 16,
                "head_dim": 24,
                "index_head_dim": 16,
                "index_n_heads": 2,
                "max_position_embeddings": 256,
                "mlp_layer_types": ["dense", "sparse", "sparse"],
                "sliding_window": 4,
                "swa_num_attention_heads": 2,
                "swa_num_key_value_heads": 2,
                "swa_q_lora_rank": 16,
                "swa_kv_lora_rank": 16,
                "swa_head_dim": 24,
                "swa_qk_nope_head_dim": 16,
                "swa_v_head_dim": 8,
                "pad_token_id": 0,
                "bos_token_id": 0,
                "eos_token_id": 0,
            },
            shrink=False,
        )
    },
)
