"""MiniMax-M3's text model: M2's mixture, the routed sum times ``routed_scaling_factor``, plus ``shared_experts``.

The block multiplies the experts' output (not the weights) by
``routed_scaling_factor`` before adding the shared expert's, so
``routed_output`` and ``expert_outputs`` are served scaled: they add up to
``mlp_output``; a write is divided back. Blocks whose ``mlp_layer_types``
entry is "dense" have no mixture.
"""

from .minimax_m2 import ENVOYS as M2
from .minimax_m2 import RENAME  # noqa: F401 - the same names
from .minimax_m2 import MiniMaxMoe


def routed_scale(envoy) -> float:
    return float(envoy._module.routed_scaling_factor)


class ScaledRoutedMoe(MiniMaxMoe):
    routed_output = MiniMaxMoe.routed_output.scaled(routed_scale)
    expert_outputs = MiniMaxMoe.expert_outputs.scaled(routed_scale)


ENVOYS = {**M2, "layers.*.mlp": ScaledRoutedMoe}
