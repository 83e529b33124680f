"""Lara Mini: Qwen3.5's gated DeltaNet blocks and plain Qwen3 attention blocks, each with a softmax mixture and an ungated shared expert.

The layer types cycle ``linear_attention``, ``sliding_attention``,
``linear_attention``, ``full_attention``, ``sliding_attention``: the DeltaNet
(``linear_attn``, Qwen3.5's) is Qwen3-Next's mixer, but the softmax attention
is Qwen3's, with no output gate (the default ``Attention``), and only the
sliding blocks get rotary embeddings: the full-attention blocks run without
positions, so their queries and keys are served as projected and normed.
The MLP of every block is Flint's block under a softmax router (the top-k of
the softmax of the logits, renormalized where ``norm_topk_prob``), with the
shared expert added in full, ungated (``Moe``).
"""

from nnterp import Attention, Moe
from nnterp.tiny import TinyConfig

from ..tiny import DELTANET
from . import qwen3_next

FAMILY = qwen3_next.FAMILY.replace(
    name="lara_mini",
    model_types=("lara_mini",),
    modeling=("transformers.models.lara_mini.modeling_lara_mini",),
    envoys={**qwen3_next.FAMILY.envoys, "layers.*.self_attn": Attention, "layers.*.mlp": Moe},
    tiny={"lara_mini": TinyConfig("lara_mini", {**DELTANET, "sliding_window": 4})},
    skips={
        "lara_mini": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
