"""MiniMax-M2: DeepSeek-V3's sigmoid mixture without groups, the selection bias held by the block, always renormalizing."""

from torch import Tensor

from .deepseek_v3 import ENVOYS as DEEPSEEK
from .deepseek_v3 import RENAME  # noqa: F401 - the same names
from .deepseek_v3 import SigmoidMoe


class MiniMaxMoe(SigmoidMoe):
    NORMALIZE = True

    def selection_bias(self) -> Tensor | None:
        """The block's ``e_score_correction_bias`` (M2 keeps it beside the router, M3 inside it)."""
        bias = super().selection_bias()
        return self._module.e_score_correction_bias if bias is None else bias


ENVOYS = {**DEEPSEEK, "layers.*.mlp": MiniMaxMoe}
