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

from ..components.selective_scan import SelectiveScan

MODELING = ("transformers.models.jamba.modeling_jamba",)

RENAME = {
    "model.layers": "layers",
    "model.embed_tokens": "embed_tokens",
    "model.final_layernorm": "norm",
    "mamba": "linear_attn",
    "feed_forward": "mlp",
    "pre_ff_layernorm": "post_attention_layernorm",
}


class JambaMoe(Moe):
    """Jamba's mixture: the router returns ``(logits, top_k_weights, top_k_index)``; the weights stay unnormalized."""

    NORMALIZE = False


ENVOYS = {**default.ENVOYS, "layers.*.mlp": JambaMoe, "layers.*.linear_attn": SelectiveScan}
