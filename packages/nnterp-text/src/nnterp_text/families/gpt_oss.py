"""GPT-OSS: the default block, its attention with a sink column in the softmax (``SinkAttention``), its MLP a mixture of experts.

The MoE block returns ``(hidden, router_scores)``; its first element is the
contribution, as ``Mlp`` reads it. Its ``router`` (a linear with a bias) takes
the top-k of the raw logits and softmaxes only those (``TOPK_FIRST``, never
renormalized); ``experts`` carry biases and their own clamped gate, and run
transformers' experts switch, so every slot's output is readable.
"""

from nnterp import Moe
from nnterp.families import default

from .sinks import SinkAttention


class TopKFirstMoe(Moe):
    """A mixture whose router softmaxes the top-k logits only: the weights sum to one by construction."""

    TOPK_FIRST = True
    NORMALIZE = False


RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": SinkAttention, "layers.*.mlp": TopKFirstMoe}
