"""Mamba-2: every block a pre-norm Mamba-2 (SSD) mixer, ``linear_attn``, and no MLP.

``backbone.layers[i]`` holds ``norm`` (the block's one norm, ``input_layernorm``)
and ``mixer`` (a ``StateSpace``); the block adds the mixer's output to the
stream, so ``layer_input + linear_attn.attention_output == layer_output``.
"""

from nnterp import Layer
from transformers.models.mamba2.modeling_mamba2 import Mamba2RMSNorm

from ..components.state_space import StateSpace

#: the transformers modules whose kernels route_kernels binds
MODELING = ("transformers.models.mamba2.modeling_mamba2",)

RENAME = {
    "backbone.layers": "layers",
    "backbone.embeddings": "embed_tokens",
    "backbone.norm_f": "norm",
    # by class: the mixer's own gated norm is a ``norm`` too
    Mamba2RMSNorm: "input_layernorm",
    "mixer": "linear_attn",
}
ENVOYS = {"layers.*": Layer, "layers.*.linear_attn": StateSpace}
