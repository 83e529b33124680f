"""HY-V3: DeepSeek-V3's sigmoid mixture without groups, its selection bias kept on the block, not the router.

The router is called with the block's ``e_score_correction_bias``, always
renormalizes the chosen scores and multiplies them by ``router_scaling_factor``.
"""

from .deepseek_v3 import ENVOYS as DEEPSEEK_V3
from .deepseek_v3 import RENAME  # noqa: F401 - the same names
from .deepseek_v3 import SigmoidMoe


class HYV3Moe(SigmoidMoe):
    NORMALIZE = True

    def selection_bias(self):
        """The block's ``e_score_correction_bias``, which it passes to the router."""
        return self._module.e_score_correction_bias


ENVOYS = {**DEEPSEEK_V3, "layers.*.mlp": HYV3Moe}
