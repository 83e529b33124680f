"""GPT-Neo: the default block; its attention is one module down (``attn.attention``) and computed in ``_attn``."""

from nnterp import Layer
from nnterp.families import default

from .own_attention import HelperAttention

RENAME = {
    "transformer.h": "layers",
    "transformer.wte": "embed_tokens",
    "transformer.ln_f": "norm",
    # attn only hands its call on to the global or local attention under it
    "attn.attention": "self_attn",
    "attention.out_proj": "attention.o_proj",
    "ln_1": "input_layernorm",
    "ln_2": "post_attention_layernorm",
    "mlp.c_fc": "mlp.up_proj",
    "mlp.c_proj": "mlp.down_proj",
    "mlp.act": "mlp.act_fn",
}


class GPTNeoLayer(Layer):
    """GPT-Neo's block, which returns ``(hidden_states, attn_weights)``."""

    returns_tuple = True


ENVOYS = {**default.ENVOYS, "layers.*": GPTNeoLayer, "layers.*.self_attn": HelperAttention}
