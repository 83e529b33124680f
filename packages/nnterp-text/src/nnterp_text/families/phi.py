"""Phi (1/2): a parallel block, one norm feeding both sublayers, under Phi's names (``dense``, ``fc1``/``fc2``, ``final_layernorm``)."""

from nnterp import ParallelLayer
from nnterp.families import default

#: the stack, the final norm and the attention's output projection, shared with Persimmon
STACK_RENAME = {
    "model.layers": "layers",
    "model.embed_tokens": "embed_tokens",
    "model.final_layernorm": "norm",
    "self_attn.dense": "self_attn.o_proj",
}

RENAME = {
    **STACK_RENAME,
    "mlp.fc1": "mlp.up_proj",
    "mlp.fc2": "mlp.down_proj",
    "mlp.activation_fn": "mlp.act_fn",
}

ENVOYS = {**default.ENVOYS, "layers.*": ParallelLayer}
