"""The tiny checkpoints of the recurrent and hybrid families: light, ``TinyConfig`` only."""

from nnterp.tiny import TinyConfig

#: a gated DeltaNet small enough for a CPU: two key heads serving four value heads of width 8
DELTANET = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4}

TINY_CONFIGS = {
    **{model_type: TinyConfig(model_type, DELTANET) for model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
    # betas doubled into (0, 2), the config's default
    "olmo_hybrid": TinyConfig("olmo_hybrid", DELTANET),
    # betas a plain sigmoid, in (0, 1)
    "olmo_hybrid-sigmoid": TinyConfig("olmo_hybrid", {**DELTANET, "linear_allow_neg_eigval": False}),
}
