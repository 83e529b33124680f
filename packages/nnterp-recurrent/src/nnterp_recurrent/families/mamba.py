"""Mamba: a stack of pure selective-scan blocks, ``x + mixer(norm(x))``, with no attention and no MLP.

Each block's ``mixer`` is a ``SelectiveScan``, reachable as ``linear_attn``;
its ``attention_output`` is all the block adds, so
``layer_input + attention_output == layer_output``. The block's one norm is
``input_layernorm``.
"""

from nnterp import Layer

from ..components.selective_scan import SelectiveScan

#: the transformers modules whose kernels route_kernels binds
MODELING = ("transformers.models.mamba.modeling_mamba",)

RENAME = {
    "backbone.layers": "layers",
    "backbone.embeddings": "embed_tokens",
    "backbone.norm_f": "norm",
    "mixer": "linear_attn",
    "norm": "input_layernorm",
}
ENVOYS = {"layers.*": Layer, "layers.*.linear_attn": SelectiveScan}
