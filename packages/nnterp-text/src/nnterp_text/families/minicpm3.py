"""MiniCPM3: the default block on latent attention, each sublayer's output scaled by ``scale_depth / sqrt(num_layers)``
before it is added, and the final stream divided by ``logits_scaling`` before ``lm_head``.

So the contributions are the scaled outputs (what the block adds), served as
``output * residual_scale`` and written back divided.
"""

from typing import Any

from nnterp import Attention, Mlp
from nnterp.families import default


def residual_scale(envoy: Any) -> float:
    """The factor the block applies to this sublayer's output: its ``residual_scale``."""
    return envoy.parent._module.residual_scale


def project_on_vocab(model: Any, hidden: Any) -> Any:
    """The final norm, the division by ``logits_scaling``, then ``lm_head``, in the model's order."""
    return model.lm_head(model.norm(hidden) / model.text_config.logits_scaling)


class MiniCPM3Attention(Attention):
    attention_output = Attention.attention_output.scaled(residual_scale)


class MiniCPM3Mlp(Mlp):
    mlp_output = Mlp.mlp_output.scaled(residual_scale)


RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": MiniCPM3Attention, "layers.*.mlp": MiniCPM3Mlp}
