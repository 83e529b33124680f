"""GLM-4: the default block (``post_attention_layernorm`` is the MLP's pre-norm, as on Llama) plus a norm on each
sublayer's output, ``post_self_attn_layernorm`` and ``post_mlp_layernorm``, whose outputs are the contributions."""

from nnterp import Attention, Mlp
from nnterp.families import default


class Glm4Attention(Attention):
    attention_output = Attention.attention_output.at("../post_self_attn_layernorm.output", select=None)


class Glm4Mlp(Mlp):
    mlp_output = Mlp.mlp_output.at("../post_mlp_layernorm.output", select=None)


RENAME = {**default.RENAME, "mlp.activation_fn": "mlp.act_fn"}
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": Glm4Attention, "layers.*.mlp": Glm4Mlp}
