"""Laguna: the default block, each head's output gated (softplus) before ``o_proj``, so the heads are read where ``o_proj`` takes them.

Its sparse blocks are DeepSeek-V3's sigmoid mixture without groups, with two
differences: the router may softcap its logits (``moe_router_logit_softcapping``)
before the sigmoid, so ``router_logits`` is what the sigmoid takes; and the
block multiplies the routed experts' sum by ``moe_routed_scaling_factor``
before adding the shared expert, so ``routed_output`` and ``expert_outputs``
are read scaled (what they add to ``mlp_output``; a write is divided back).
The router always renormalizes and does not scale.
"""

from nnterp import GatedAttention, Moe
from nnterp.families import default

from .deepseek_v3 import SigmoidMoe


def _routed_scale(envoy) -> float:
    return float(envoy._module.routed_scaling_factor)


class LagunaMoe(SigmoidMoe):
    NORMALIZE = True

    router_logits = Moe.router_logits.at("router.source.torch_sigmoid_0.input")
    routed_output = Moe.routed_output.scaled(_routed_scale)
    expert_outputs = Moe.expert_outputs.scaled(_routed_scale)


RENAME = {**default.RENAME, "mlp.gate": "mlp.router"}
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": GatedAttention, "layers.*.mlp": LagunaMoe}
