"""Granite: the default block, with each sublayer's output scaled by ``residual_multiplier`` before it is added,
and the logits divided by ``logits_scaling``.

So the contributions are the scaled outputs (what the block adds), served as
``output * residual_multiplier`` and written back divided; the attention's own
``attention_multiplier`` is its softmax scale and changes nothing here.
"""

from nnterp import GraniteAttention, GraniteMlp, TinyConfig
from nnterp.families import default
from nnterp.logits import divided_by_logits_scaling

#: Granite's multipliers away from one, so a contribution read unscaled cannot pass
GRANITE_SCALES = {
    "residual_multiplier": 0.3,
    "logits_scaling": 2.5,
    "embedding_multiplier": 3.0,
    "attention_multiplier": 0.2,
}

FAMILY = default.FAMILY.replace(
    name="granite",
    model_types=("granite",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": GraniteAttention, "layers.*.mlp": GraniteMlp},
    project_on_vocab=divided_by_logits_scaling,
    tiny={"granite": TinyConfig("granite", {"num_hidden_layers": 3, **GRANITE_SCALES})},
)
