"""The tiny checkpoints of the recurrent and hybrid families: light, ``TinyConfig`` only."""

from nnterp.tiny import TinyConfig

#: a gated DeltaNet small enough for a CPU: two key heads serving four value heads of width 8
DELTANET = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4}

#: a Mamba-2 mixer: eight heads in two groups, a state of 8, chunks of 4 so a prompt spans several
SSD = {"mamba_n_heads": 8, "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_chunk_size": 4}

#: a Mamba-2 mixer for Nemotron-H (its own field names)
NEMOTRON_SSD = {"mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 8, "chunk_size": 4}
#: one block of each kind: Mamba-2, mixture, attention, dense MLP, then Mamba-2 again so a decode step crosses two mixers
NEMOTRON_BLOCKS = {"layers_block_type": ["linear_attention", "moe", "full_attention", "mlp", "linear_attention"]}
#: Falcon-H1: the SSD mixer in 8 heads of 8, every muP multiplier away from 1 so that a missed one shows
FALCON_H1 = {
    **SSD, "mamba_d_ssm": 64, "mamba_d_head": 8, "attention_in_multiplier": 0.7, "attention_out_multiplier": 0.6,
    "ssm_in_multiplier": 0.8, "ssm_out_multiplier": 1.3, "embedding_multiplier": 2.0, "lm_head_multiplier": 0.5,
    "key_multiplier": 0.9, "mlp_multipliers": [0.9, 1.1], "ssm_multipliers": [1.1, 0.9, 1.2, 0.8, 1.05],
}

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
    # grouped sigmoid routing: 8 experts in 2 groups, one group kept, weights scaled
    "nemotron_h": TinyConfig("nemotron_h", {**NEMOTRON_SSD, **NEMOTRON_BLOCKS, "moe_shared_expert_intermediate_size": 32, "n_routed_experts": 8, "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5}),
    # the routed experts run in a latent space between fc1_latent_proj and fc2_latent_proj
    "nemotron_h-latent": TinyConfig("nemotron_h", {**NEMOTRON_SSD, **NEMOTRON_BLOCKS, "moe_shared_expert_intermediate_size": 32, "moe_latent_size": 32}),
    # the decode update takes the gate z (no gated norm); and the gated-norm variant, whose norm gates after the kernel
    "falcon_h1": TinyConfig("falcon_h1", FALCON_H1),
    "falcon_h1-rmsnorm": TinyConfig("falcon_h1", {**FALCON_H1, "mamba_rms_norm": True}),
    # blocks: mamba, hybrid, mamba, hybrid: one shared transformer, tied, with LoRA adapters (kv heads == heads) and rotary
    "zamba2": TinyConfig("zamba2", {"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"], "n_mamba_heads": 8, "mamba_ngroups": 2, "mamba_d_state": 8, "chunk_size": 4, "num_key_value_heads": 4, "use_shared_attention_adapter": True, "adapter_rank": 8, "use_mem_rope": True}),
}
