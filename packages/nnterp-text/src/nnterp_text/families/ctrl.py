"""CTRL: the default pre-norm block under its own names, its feed-forward an ``nn.Sequential`` (``ffn.0``, ``ffn.1``, ``ffn.2``)."""

from nnterp import TinyConfig
from nnterp.families import default

FAMILY = default.FAMILY.replace(
    name="ctrl",
    model_types=("ctrl",),
    rename={
        "transformer.h": "layers",
        "transformer.w": "embed_tokens",
        "transformer.layernorm": "norm",
        "multi_head_attention": "self_attn",
        "multi_head_attention.dense": "multi_head_attention.o_proj",
        "layernorm1": "input_layernorm",
        "layernorm2": "post_attention_layernorm",
        "ffn": "mlp",
        "ffn.0": "ffn.up_proj",
        "ffn.1": "ffn.act_fn",
        "ffn.2": "ffn.down_proj",
    },
    tiny={"ctrl": TinyConfig("ctrl", {"n_layer": 3, "dff": 128})},
)
