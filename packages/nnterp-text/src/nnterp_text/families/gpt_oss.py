"""GPT-OSS: the default block, its attention with a sink column in the softmax (``SinkAttention``), its MLP a mixture of experts.

The MoE block returns ``(hidden, router_scores)``; its first element is the
contribution, as ``Mlp`` reads it. It has no one activation or neuron tensor.
"""

from nnterp.families import default

from .sinks import SinkAttention

RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": SinkAttention}
