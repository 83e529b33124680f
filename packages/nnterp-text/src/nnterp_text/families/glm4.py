"""GLM-4: the default block (``post_attention_layernorm`` is the MLP's pre-norm, as on Llama) plus a norm on each
sublayer's output, ``post_self_attn_layernorm`` and ``post_mlp_layernorm``, whose outputs are the contributions."""

from nnterp import Glm4Attention, Glm4Mlp, TinyConfig
from nnterp.families import default

FAMILY = default.FAMILY.replace(
    name="glm4",
    model_types=("glm4",),
    rename={**default.FAMILY.rename, "mlp.activation_fn": "mlp.act_fn"},
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": Glm4Attention, "layers.*.mlp": Glm4Mlp},
    tiny={"glm4": TinyConfig("glm4")},
)
