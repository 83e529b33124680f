"""DBRX: the default block under DBRX's names, its attention and both norms wrapped in ``norm_attn_norm``.

``norm_attn_norm`` runs the input norm, the attention, the residual add and the
MLP's pre-norm, and returns the stream and the normed stream; the aliases reach
inside it, so the attention's contribution is ``attn``'s own output and the
stream between the sublayers is what ``norm_2`` is called with.
"""

from nnterp import Attention, Layer, Mlp

RENAME = {
    "transformer.blocks": "layers",
    "transformer.wte": "embed_tokens",
    "transformer.norm_f": "norm",
    "norm_attn_norm.attn": "self_attn",
    "norm_attn_norm.norm_1": "input_layernorm",
    "norm_attn_norm.norm_2": "post_attention_layernorm",
    "attn.out_proj": "attn.o_proj",
    "ffn": "mlp",
}

ENVOYS = {
    "layers.*": Layer,
    "layers.*.norm_attn_norm.attn": Attention,
    "layers.*.ffn": Mlp,
}
