"""The tiny checkpoints of the recurrent and hybrid families: light, ``TinyConfig`` only."""

from nnterp.tiny import TinyConfig

#: a gated DeltaNet small enough for a CPU: two key heads serving four value heads of width 8
DELTANET = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4}

#: a Mamba-2 mixer: eight heads in two groups, a state of 8, chunks of 4 so a prompt spans several
SSD = {"mamba_n_heads": 8, "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_chunk_size": 4}

TINY_CONFIGS = {
    **{model_type: TinyConfig(model_type, DELTANET) for model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
    # betas doubled into (0, 2), the config's default
    "olmo_hybrid": TinyConfig("olmo_hybrid", DELTANET),
    # betas a plain sigmoid, in (0, 1)
    "olmo_hybrid-sigmoid": TinyConfig("olmo_hybrid", {**DELTANET, "linear_allow_neg_eigval": False}),
    # MLA keeps a key/value head per query head
    **{model_type: TinyConfig(model_type, {"linear_num_heads": 4, "linear_head_dim": 8, "num_key_value_heads": 4}) for model_type in ("kimi_linear", "bailing_hybrid")},
    **{model_type: TinyConfig(model_type, {"intermediate_size": 128, "state_size": 8}) for model_type in ("mamba", "falcon_mamba")},
    # blocks: mamba + mixture, attention + MLP, mamba + MLP, attention + mixture
    "jamba": TinyConfig("jamba", {"num_hidden_layers": 4, "intermediate_size": 128, "mamba_d_state": 8, "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 3, "expert_layer_offset": 0, "num_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 256}),
    "mamba2": TinyConfig("mamba2", {"num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 8, "chunk_size": 4}),
    "bamba": TinyConfig("bamba", {**SSD, "attn_layer_indices": [1]}),
    "granitemoehybrid": TinyConfig("granitemoehybrid", {**SSD, "layer_types": ["linear_attention", "attention"], "shared_intermediate_size": 32, "residual_multiplier": 0.5}),
}
