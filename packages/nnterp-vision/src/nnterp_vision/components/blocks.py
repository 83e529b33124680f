"""A tower's block, attention and MLP: the text model's components, over patches.

A ViT block is the pre-norm block the text components are defined on
(``x + attn(norm1(x))`` then ``+ mlp(norm2(.))``), so every value keeps its
meaning and its path; what changes is the shape (``Patches``: images, not
prompts, and patches, not tokens) and that each needs an image to reach the
model.
"""

from __future__ import annotations

from nnterp.components import INTERIOR, Attention, Layer, Mlp

from ..layouts import Patches
from .relaid import each_value

STREAM = ("layer_input", "attention_norm_output", "layer_mid", "mlp_norm_output", "mlp_input", "layer_output")


@each_value(dict.fromkeys(STREAM, Patches))
class VisionLayer(Layer):
    """A tower block: ``layer_input + self_attn.attention_output + mlp.mlp_output == layer_output``, ``[images, patches, vision_hidden_size]``."""


@each_value({"attention_output": Patches, **dict.fromkeys(INTERIOR)})
class VisionAttention(Attention):
    """A tower block's attention: its contribution over patches, its interior as the text attention's (``batch`` is images).

    The pattern is not causal: every patch attends to every patch.
    """


@each_value({"mlp_output": Patches, "mlp_activation": None, "mlp_neurons": None})
class VisionMlp(Mlp):
    """A tower block's MLP: its contribution over patches."""
