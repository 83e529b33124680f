"""ERNIE-4.5-MoE: OLMoE's mixture, choosing by the softmax plus ``moe_statics``' bias, renormalizing by a clamped sum.

The router picks the top-k of ``softmax(logits) + e_score_correction_bias``
(held by its ``moe_statics`` child), weighs them by the unbiased
probabilities and divides by their sum clamped below at ``moe_norm_min``.
``shared_experts`` runs beside the routed ones; blocks outside
``moe_layer_start_index .. moe_layer_end_index`` are dense.
"""

from nnterp import Moe, TinyConfig

from torch import Tensor

from . import olmoe


class ErnieMoe(Moe):
    NORMALIZE = False

    def selection_bias(self) -> Tensor:
        return self.router.moe_statics._module.e_score_correction_bias.squeeze(0)

    def route(self, router_logits: Tensor) -> tuple[Tensor, Tensor]:
        weights, indices = super().route(router_logits)
        return weights / weights.sum(-1, keepdim=True).clamp(min=self.router._module.norm_min), indices


FAMILY = olmoe.FAMILY.replace(
    name="ernie4_5_moe",
    model_types=("ernie4_5_moe",),
    envoys={**olmoe.FAMILY.envoys, "layers.*.mlp": ErnieMoe},
    tiny={"ernie4_5_moe": TinyConfig("ernie4_5_moe")},
)
