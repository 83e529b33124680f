"""GPT-Neo: the default block; its attention is one module down (``attn.attention``) and computed in ``_attn``."""

from nnterp import Layer
from nnterp.families import default

from . import gpt2
from .own_attention import HelperAttention

RENAME = {
    # GPT-2's names, but for the attention: attn only hands its call on to the global or local attention under it
    **{native: standard for native, standard in gpt2.RENAME.items() if not native.startswith("attn")},
    "attn.attention": "self_attn",
    "attention.out_proj": "attention.o_proj",
}


class GPTNeoLayer(Layer):
    """GPT-Neo's block, which returns ``(hidden_states, attn_weights)``."""

    returns_tuple = True


ENVOYS = {**default.ENVOYS, "layers.*": GPTNeoLayer, "layers.*.self_attn": HelperAttention}
