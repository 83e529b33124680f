"""Qwen2-MoE: OLMoE's mixture plus a shared expert whose output the block gates by ``sigmoid(shared_expert_gate(x))``.

The block computes ``shared_expert_output = sigmoid(shared_expert_gate(x))
* shared_expert(x)`` after the routed experts ran and adds it to them, so
``shared_expert_output`` is that gated product, read at the binding where
the block's forward makes it (``source.shared_expert_output_1``): writing it
changes what the block adds. ``shared_experts.output`` is the ungated
expert, ``shared_expert_gate.output`` the gate's logit. The first blocks
listed in ``mlp_only_layers`` are dense. That mixture is ``GatedSharedMoe``.
"""

from nnterp import GatedSharedMoe, TinyConfig

from . import olmoe

FAMILY = olmoe.FAMILY.replace(
    name="qwen2_moe",
    model_types=("qwen2_moe",),
    rename={**olmoe.FAMILY.rename, "mlp.shared_expert": "mlp.shared_experts"},
    envoys={**olmoe.FAMILY.envoys, "layers.*.mlp": GatedSharedMoe},
    tiny={"qwen2_moe": TinyConfig("qwen2_moe")},
    skips={
        "qwen2_moe": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
