"""HY-V3: DeepSeek-V3's sigmoid mixture without groups, its selection bias kept on the block, not the router.

The router is called with the block's ``e_score_correction_bias``, always
renormalizes the chosen scores and multiplies them by ``router_scaling_factor``.
"""

from nnterp import SigmoidMoe, TinyConfig

from . import deepseek_v3


class HYV3Moe(SigmoidMoe):
    NORMALIZE = True

    def selection_bias(self):
        """The block's ``e_score_correction_bias``, which it passes to the router."""
        return self._module.e_score_correction_bias


FAMILY = deepseek_v3.FAMILY.replace(
    name="hy_v3",
    model_types=("hy_v3",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*.mlp": HYV3Moe},
    tiny={"hy_v3": TinyConfig("hy_v3")},
)
