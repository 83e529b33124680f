"""MiniCPM5-MoE: DeepSeek-V3's mixture (a sigmoid router, a selection bias, groups, renormalized and scaled weights,
a shared expert, dense first blocks) under GQA attention whose heads are gated before ``o_proj``.

``q_gate_proj`` projects each head's query and gate side by side; the head
outputs are multiplied by ``sigmoid(gate)`` before ``o_proj``, as on AFMoE
and Qwen3-Next (``GatedAttention``): the heads are read where ``o_proj``
takes them, the pattern against the values before the gate. The router
computes its logits in float32 whatever the model's dtype.
"""

from nnterp import GatedAttention, TinyConfig

from ..tiny import GROUPED_ROUTE, SPARSE
from . import deepseek_v3

FAMILY = deepseek_v3.FAMILY.replace(
    name="minicpm5_moe",
    model_types=("minicpm5_moe",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*.self_attn": GatedAttention},
    # a dense block and two mixtures whose grouped routing bites
    tiny={"minicpm5_moe": TinyConfig("minicpm5_moe", {"num_hidden_layers": 3, **SPARSE, **GROUPED_ROUTE})},
)
