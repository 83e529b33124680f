"""MiniCPM3: the default block on latent attention, each sublayer's output scaled by ``scale_depth / sqrt(num_layers)``
before it is added, and the final stream divided by ``logits_scaling`` before ``lm_head``.

So the contributions are the scaled outputs (what the block adds), served as
``output * residual_scale`` and written back divided.
"""

from typing import Any

from nnterp import Attention, Mlp, TinyConfig
from nnterp.families import default

from ..tiny import MLA


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


FAMILY = default.FAMILY.replace(
    name="minicpm3",
    model_types=("minicpm3",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": MiniCPM3Attention, "layers.*.mlp": MiniCPM3Mlp},
    project_on_vocab=project_on_vocab,
    tiny={"minicpm3": TinyConfig("minicpm3", {**MLA, "num_hidden_layers": 3})},
)
