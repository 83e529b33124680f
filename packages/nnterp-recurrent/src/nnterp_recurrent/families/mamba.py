"""Mamba: a stack of pure selective-scan blocks, ``x + mixer(norm(x))``, with no attention and no MLP.

Each block's ``mixer`` is a ``SelectiveScan``, reachable as ``linear_attn``;
its ``attention_output`` is all the block adds, so
``layer_input + attention_output == layer_output``. The block's one norm is
``input_layernorm``.
"""

from nnterp import Layer
from nnterp.tiny import TinyConfig

from ..components.selective_scan import SelectiveScan
from ..family import RecurrentFamily
from ..tiny import SELECTIVE_SCAN

FAMILY = RecurrentFamily(
    name="mamba",
    model_types=("mamba",),
    modeling=("transformers.models.mamba.modeling_mamba",),
    rename={
        "backbone.layers": "layers",
        "backbone.embeddings": "embed_tokens",
        "backbone.norm_f": "norm",
        "mixer": "linear_attn",
        "norm": "input_layernorm",
    },
    envoys={"layers.*": Layer, "layers.*.linear_attn": SelectiveScan},
    tiny={"mamba": TinyConfig("mamba", SELECTIVE_SCAN)},
    skips={
        "mamba": {
            "mid_stream": "no post_attention_layernorm module on this block",
        },
    },
)
