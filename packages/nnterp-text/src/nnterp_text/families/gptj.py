"""GPT-J: a parallel block (one norm feeds both sublayers) whose attention does its arithmetic in its own ``_attn``."""

from nnterp import ParallelLayer
from nnterp.families import default

from .gpt2 import ROOT
from .own_attention import HelperAttention

RENAME = {
    **ROOT,
    "attn": "self_attn",
    "ln_1": "input_layernorm",
    "attn.out_proj": "attn.o_proj",
    "mlp.fc_in": "mlp.up_proj",
    "mlp.fc_out": "mlp.down_proj",
    "mlp.act": "mlp.act_fn",
}


class GPTJLayer(ParallelLayer):
    """GPT-J's block, which returns ``(hidden_states, attn_weights)``."""

    returns_tuple = True


ENVOYS = {**default.ENVOYS, "layers.*": GPTJLayer, "layers.*.self_attn": HelperAttention}
