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
    tiny={"mamba2": TinyConfig("mamba2", {"num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 8, "chunk_size": 4})},
    skips={
        "mamba2": {
            "head_outputs_are_pattern_against_values": "no block has self_attn.attention_values",
            "head_outputs_make_the_projection": "no block has self_attn.attention_head_outputs",
            "mid_stream": "no post_attention_layernorm module on this block",
            "neurons_make_contribution": "no block has mlp.mlp_activation, mlp.mlp_neurons",
            "pattern_is_softmax_of_scores": "no block has self_attn.attention_scores",
            "scores_are_queries_against_keys": "no block has self_attn.attention_queries",
            "written_pattern_moves_logits": "no block has self_attn.attention_probabilities",
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
