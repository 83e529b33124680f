"""GPT-OSS: the default block, its attention with a sink column in the softmax (``SinkAttention``), its MLP a mixture of experts.

The MoE block returns ``(hidden, router_scores)``; its first element is the
contribution, as ``Mlp`` reads it. Its ``router`` (a linear with a bias) takes
the top-k of the raw logits and softmaxes only those (``TOPK_FIRST``, never
renormalized); ``experts`` carry biases and their own clamped gate, and run
transformers' experts switch, so every slot's output is readable.
"""

from nnterp import TinyConfig, TopKFirstMoe
from nnterp.families import default

from .sinks import SinkAttention

FAMILY = default.FAMILY.replace(
    name="gpt_oss",
    model_types=("gpt_oss",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": SinkAttention, "layers.*.mlp": TopKFirstMoe},
    tiny={"gpt_oss": TinyConfig("gpt_oss", {"sliding_window": 4})},
    skips={
        "gpt_oss": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
