"""HyperCLOVA X: GLM-4's post-sublayer norms (``post_norm1``, ``post_norm2``) with Granite's ``residual_multiplier``
on what they hand the stream, and logits multiplied by ``logits_scaling``."""

from nnterp import Attention, Mlp
from nnterp.families import default
from nnterp.logits import times_logits_scaling as project_on_vocab  # noqa: F401 - the family's logits

from .granite import residual_multiplier


class HyperClovaXAttention(Attention):
    attention_output = Attention.attention_output.at("../post_norm1.output", select=None).scaled(residual_multiplier)


class HyperClovaXMlp(Mlp):
    mlp_output = Mlp.mlp_output.at("../post_norm2.output", select=None).scaled(residual_multiplier)


RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": HyperClovaXAttention, "layers.*.mlp": HyperClovaXMlp}
