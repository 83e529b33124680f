"""HyperCLOVA X: GLM-4's post-sublayer norms (``post_norm1``, ``post_norm2``) with Granite's ``residual_multiplier``
on what they hand the stream, and logits multiplied by ``logits_scaling``."""

from nnterp import Attention, Mlp, TinyConfig, residual_multiplier
from nnterp.families import default
from nnterp.logits import times_logits_scaling


class HyperClovaXAttention(Attention):
    attention_output = Attention.attention_output.at("../post_norm1.output", select=None).scaled(residual_multiplier)


class HyperClovaXMlp(Mlp):
    mlp_output = Mlp.mlp_output.at("../post_norm2.output", select=None).scaled(residual_multiplier)


FAMILY = default.FAMILY.replace(
    name="hyperclovax",
    model_types=("hyperclovax",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": HyperClovaXAttention, "layers.*.mlp": HyperClovaXMlp},
    project_on_vocab=times_logits_scaling,
    tiny={
        "hyperclovax": TinyConfig(
            "hyperclovax", {"residual_multiplier": 0.3, "logits_scaling": 2.5, "embedding_multiplier": 3.0}
        )
    },
)
