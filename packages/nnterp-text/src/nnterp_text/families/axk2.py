"""AXK2: DeepSeek's latent attention with a sigmoid gate on the heads before ``o_proj``: served as Laguna is.

Its sparse blocks are DeepSeek-V3's mixture but for one line: grouped routing
(only where ``n_group`` is set) fills the dropped groups' scores with 0, not
-inf, so a kept expert whose biased score is negative can lose to a dropped one.
"""

from torch import Tensor

from nnterp_text.families.deepseek_v3 import SigmoidMoe
from nnterp_text.families.laguna import ENVOYS as LAGUNA
from nnterp_text.families.laguna import RENAME  # noqa: F401 - the same diff of the default


class Axk2Moe(SigmoidMoe):
    def _within_kept_groups(self, choice: Tensor, groups: int, kept: int) -> Tensor:
        dropped = super()._within_kept_groups(choice, groups, kept).isinf()
        return choice.masked_fill(dropped, 0.0)


ENVOYS = {**LAGUNA, "layers.*.mlp": Axk2Moe}
