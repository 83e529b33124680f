"""MiniMax-M2: DeepSeek-V3's sigmoid mixture without groups, the selection bias held by the block, always renormalizing."""

from nnterp import SigmoidMoe, TinyConfig

from torch import Tensor

from . import deepseek_v3


class MiniMaxMoe(SigmoidMoe):
    NORMALIZE = True

    def selection_bias(self) -> Tensor | None:
        """The block's ``e_score_correction_bias`` (M2 keeps it beside the router, M3 inside it)."""
        bias = super().selection_bias()
        return self._module.e_score_correction_bias if bias is None else bias


FAMILY = deepseek_v3.FAMILY.replace(
    name="minimax_m2",
    model_types=("minimax_m2",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*.mlp": MiniMaxMoe},
    tiny={"minimax_m2": TinyConfig("minimax_m2")},
    skips={
        "minimax_m2": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
