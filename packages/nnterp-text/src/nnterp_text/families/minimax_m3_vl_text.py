"""MiniMax-M3's text model: M2's mixture, the routed sum times ``routed_scaling_factor``, plus ``shared_experts``.

The block multiplies the experts' output (not the weights) by
``routed_scaling_factor`` before adding the shared expert's, so
``routed_output`` and ``expert_outputs`` are served scaled: they add up to
``mlp_output``; a write is divided back. Blocks whose ``mlp_layer_types``
entry is "dense" have no mixture.
"""

from nnterp import TinyConfig

from . import minimax_m2
from .minimax_m2 import MiniMaxMoe


def routed_scale(envoy) -> float:
    return float(envoy._module.routed_scaling_factor)


class ScaledRoutedMoe(MiniMaxMoe):
    routed_output = MiniMaxMoe.routed_output.scaled(routed_scale)
    expert_outputs = MiniMaxMoe.expert_outputs.scaled(routed_scale)


FAMILY = minimax_m2.FAMILY.replace(
    name="minimax_m3_vl_text",
    model_types=("minimax_m3_vl_text",),
    envoys={**minimax_m2.FAMILY.envoys, "layers.*.mlp": ScaledRoutedMoe},
    tiny={"minimax_m3_vl_text": TinyConfig("minimax_m3_vl_text")},
    skips={
        "minimax_m3_vl_text": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
