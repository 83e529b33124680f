"""GPT-J: a parallel block (one norm feeds both sublayers) on transformers' shared attention interface."""

from nnterp import ParallelLayer, TinyConfig
from nnterp.families import default

from .gpt2 import ROOT

FAMILY = default.FAMILY.replace(
    name="gptj",
    model_types=("gptj",),
    rename={
        **ROOT,
        "attn": "self_attn",
        "ln_1": "input_layernorm",
        "attn.out_proj": "attn.o_proj",
        "mlp.fc_in": "mlp.up_proj",
        "mlp.fc_out": "mlp.down_proj",
        "mlp.act": "mlp.act_fn",
    },
    envoys={**default.FAMILY.envoys, "layers.*": ParallelLayer},
    tiny={"gptj": TinyConfig("gptj", {"n_layer": 3, "rotary_dim": 8})},
    skips={
        "gptj": {
            "mid_stream": "a parallel block",
        },
    },
)
