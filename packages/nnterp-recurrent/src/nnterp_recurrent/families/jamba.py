"""Jamba: a hybrid of Mamba-1 blocks (``mamba``, reachable as ``linear_attn``) and softmax attention blocks, each with an MLP.

A block has one mixer or the other, then the feed-forward, pre-norm both:
``input_layernorm`` and ``pre_ff_layernorm`` (``post_attention_layernorm``).
The feed-forward (``feed_forward``, ``mlp``) is a dense gated MLP on some
blocks and a mixture of experts on others (``config.layers_num_experts``):
a softmax router whose top-k weights are not renormalized, and fused
experts. The Mamba mixer is Mamba's, its B, C and dt normed before the scan.
"""

from nnterp import Moe
from nnterp.families import default
from nnterp.tiny import TinyConfig

from ..components.selective_scan import SelectiveScan
from ..family import RecurrentFamily


class JambaMoe(Moe):
    """Jamba's mixture: the router returns ``(logits, top_k_weights, top_k_index)``; the weights stay unnormalized."""

    NORMALIZE = False


FAMILY = RecurrentFamily(
    name="jamba",
    model_types=("jamba",),
    modeling=("transformers.models.jamba.modeling_jamba",),
    rename={
        "model.layers": "layers",
        "model.embed_tokens": "embed_tokens",
        "model.final_layernorm": "norm",
        "mamba": "linear_attn",
        "feed_forward": "mlp",
        "pre_ff_layernorm": "post_attention_layernorm",
    },
    envoys={**default.FAMILY.envoys, "layers.*.mlp": JambaMoe, "layers.*.linear_attn": SelectiveScan},
    tiny={
        # blocks: mamba + mixture, attention + MLP, mamba + MLP, attention + mixture
        "jamba": TinyConfig(
            "jamba",
            {
                "num_hidden_layers": 4,
                "intermediate_size": 128,
                "mamba_d_state": 8,
                "attn_layer_period": 2,
                "attn_layer_offset": 1,
                "expert_layer_period": 3,
                "expert_layer_offset": 0,
                "num_experts": 4,
                "num_experts_per_tok": 2,
                "max_position_embeddings": 256,
            },
        ),
    },
)
