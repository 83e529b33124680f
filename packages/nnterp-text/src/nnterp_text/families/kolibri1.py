"""Kolibri-1: GLM-4's post-sublayer norms around a mixture of experts (so no dense MLP to alias).

The router chooses the top-k of its logits plus ``e_score_correction_bias``
and weighs each chosen expert by the sigmoid of its logit, renormalized when
``norm_topk_prob`` is set; it does not scale. A shared expert runs beside.
"""

from nnterp import Moe, TinyConfig
from nnterp.families import default

import torch
from torch import Tensor

from . import glm4


class Kolibri1Moe(Moe):
    SCORING = "sigmoid"

    mlp_output = Moe.mlp_output.at("../post_mlp_layernorm.output", select=None)

    def route(self, router_logits: Tensor) -> tuple[Tensor, Tensor]:
        """The top-k of ``router_logits`` plus the selection bias, weighed by the sigmoid of the chosen logits."""
        logits = router_logits.float()
        bias = self.selection_bias()
        choice = logits if bias is None else logits + bias.float()
        indices = choice.topk(self.top_k, dim=-1).indices
        weights = torch.sigmoid(logits.gather(-1, indices))
        if self.normalizes():
            weights = weights / weights.sum(-1, keepdim=True)
        return weights, indices


FAMILY = glm4.FAMILY.replace(
    name="kolibri1",
    model_types=("kolibri1",),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={**glm4.FAMILY.envoys, "layers.*.mlp": Kolibri1Moe},
    tiny={"kolibri1": TinyConfig("kolibri1")},
    skips={
        "kolibri1": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
