"""Mamba-2: every block a pre-norm Mamba-2 (SSD) mixer, ``linear_attn``, and no MLP.

``backbone.layers[i]`` holds ``norm`` (the block's one norm, ``input_layernorm``)
and ``mixer`` (a ``StateSpace``); the block adds the mixer's output to the
stream, so ``layer_input + linear_attn.attention_output == layer_output``.
"""

from nnterp import Layer
from nnterp.tiny import TinyConfig

from transformers.models.mamba2.modeling_mamba2 import Mamba2RMSNorm

from ..components.state_space import StateSpace
from ..family import RecurrentFamily

FAMILY = RecurrentFamily(
    name="mamba2",
    model_types=("mamba2",),
    modeling=("transformers.models.mamba2.modeling_mamba2",),
    rename={
        "backbone.layers": "layers",
        "backbone.embeddings": "embed_tokens",
        "backbone.norm_f": "norm",
        # by class: the mixer's own gated norm is a ``norm`` too
        Mamba2RMSNorm: "input_layernorm",
        "mixer": "linear_attn",
    },
    envoys={"layers.*": Layer, "layers.*.linear_attn": StateSpace},
    tiny={
        "mamba2": TinyConfig(
            "mamba2", {"num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 8, "chunk_size": 4}
        )
    },
    skips={
        "mamba2": {
            "mid_stream": "no post_attention_layernorm module on this block",
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
