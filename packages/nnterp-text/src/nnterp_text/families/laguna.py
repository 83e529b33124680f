"""Laguna: the default block, each head's output gated (softplus) before ``o_proj``, so the heads are read where ``o_proj`` takes them.

Its sparse blocks are DeepSeek-V3's sigmoid mixture without groups, with two
differences: the router may softcap its logits (``moe_router_logit_softcapping``)
before the sigmoid, so ``router_logits`` is what the sigmoid takes; and the
block multiplies the routed experts' sum by ``moe_routed_scaling_factor``
before adding the shared expert, so ``routed_output`` and ``expert_outputs``
are read scaled (what they add to ``mlp_output``; a write is divided back).
The router always renormalizes and does not scale.
"""

from nnterp import GatedAttention, Moe, SigmoidMoe, TinyConfig
from nnterp.families import default

from ..tiny import SPARSE


def _routed_scale(envoy) -> float:
    return float(envoy._module.routed_scaling_factor)


class LagunaMoe(SigmoidMoe):
    NORMALIZE = True

    router_logits = Moe.router_logits.at("router.source.torch_sigmoid_0.input")
    routed_output = Moe.routed_output.scaled(_routed_scale)
    expert_outputs = Moe.expert_outputs.scaled(_routed_scale)


#: a full, a sliding (twice the heads) and a full block
LAYERS = {
    "num_hidden_layers": 3,
    **SPARSE,
    "layer_types": ["full_attention", "sliding_attention", "full_attention"],
    "sliding_window": 4,
    "num_attention_heads_per_layer": [4, 8, 4],
}

FAMILY = default.FAMILY.replace(
    name="laguna",
    model_types=("laguna",),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": GatedAttention, "layers.*.mlp": LagunaMoe},
    tiny={
        "laguna": TinyConfig("laguna", LAYERS),
        # softcapped router logits and a routed sum the block scales (the plain tiny has both off)
        "laguna-scaled": TinyConfig(
            "laguna", {**LAYERS, "moe_routed_scaling_factor": 2.5, "moe_router_logit_softcapping": 0.5}
        ),
    },
)
