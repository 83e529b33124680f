"""AFMoE: Gemma-2's sandwich block, its MLP's norms called ``pre_mlp_layernorm`` and ``post_mlp_layernorm``,
and each head's output gated before the projection."""

from nnterp import GatedAttention, PostNormAttention
from nnterp.families import default

from .gemma2 import ENVOYS as GEMMA2


class AfmoeAttention(GatedAttention, PostNormAttention):
    """Gated heads, and the post norm's output as the contribution."""


ENVOYS = {**GEMMA2, "layers.*.self_attn": AfmoeAttention}

RENAME = {**default.RENAME, "pre_mlp_layernorm": "pre_feedforward_layernorm", "post_mlp_layernorm": "post_feedforward_layernorm"}
