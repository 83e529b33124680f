"""Phi (1/2): a parallel block, one norm feeding both sublayers, under Phi's names (``dense``, ``fc1``/``fc2``, ``final_layernorm``)."""

from nnterp import ParallelLayer, TinyConfig
from nnterp.families import default

#: the stack, the final norm and the attention's output projection, shared with Persimmon
STACK_RENAME = {
    "model.layers": "layers",
    "model.embed_tokens": "embed_tokens",
    "model.final_layernorm": "norm",
    "self_attn.dense": "self_attn.o_proj",
}


FAMILY = default.FAMILY.replace(
    name="phi",
    model_types=("phi",),
    rename={
        **STACK_RENAME,
        "mlp.fc1": "mlp.up_proj",
        "mlp.fc2": "mlp.down_proj",
        "mlp.activation_fn": "mlp.act_fn",
    },
    envoys={**default.FAMILY.envoys, "layers.*": ParallelLayer},
    tiny={"phi": TinyConfig("phi", {"num_hidden_layers": 3})},
    skips={
        "phi": {
            "mid_stream": "a parallel block",
        },
    },
)
