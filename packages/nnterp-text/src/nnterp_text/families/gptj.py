"""GPT-J: a parallel block (one norm feeds both sublayers) whose attention does its arithmetic in its own ``_attn``."""

from nnterp import ParallelLayer, TinyConfig
from nnterp.families import default

from .gpt2 import ROOT
from .own_attention import HelperAttention


class GPTJLayer(ParallelLayer):
    """GPT-J's block, which returns ``(hidden_states, attn_weights)``."""

    returns_tuple = True


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
    envoys={**default.FAMILY.envoys, "layers.*": GPTJLayer, "layers.*.self_attn": HelperAttention},
    tiny={"gptj": TinyConfig("gptj", {"n_layer": 3, "rotary_dim": 8})},
    skips={
        "gptj": {
            "mid_stream": "a parallel block",
        },
    },
)
