"""The tiny checkpoints of the recurrent and hybrid families: light, ``TinyConfig`` only."""

from nnterp.tiny import TinyConfig

#: a gated DeltaNet small enough for a CPU: two key heads serving four value heads of width 8
DELTANET = {"linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4}

TINY_CONFIGS = {
    "qwen3_next": TinyConfig("qwen3_next", DELTANET),
}
