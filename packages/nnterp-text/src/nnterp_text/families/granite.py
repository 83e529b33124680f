"""Granite: the default block, with each sublayer's output scaled by ``residual_multiplier`` before it is added,
and the logits divided by ``logits_scaling``.

So the contributions are the scaled outputs (what the block adds), served as
``output * residual_multiplier`` and written back divided; the attention's own
``attention_multiplier`` is its softmax scale and changes nothing here.
"""

from typing import Any

from nnterp import Attention, Mlp
from nnterp.families import default
from nnterp.logits import divided_by_logits_scaling as project_on_vocab  # noqa: F401 - the family's logits


def residual_multiplier(envoy: Any) -> float:
    """The factor the block applies to this sublayer's output."""
    return envoy.parent._module.residual_multiplier


class GraniteAttention(Attention):
    attention_output = Attention.attention_output.scaled(residual_multiplier)


class GraniteMlp(Mlp):
    mlp_output = Mlp.mlp_output.scaled(residual_multiplier)


RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": GraniteAttention, "layers.*.mlp": GraniteMlp}
