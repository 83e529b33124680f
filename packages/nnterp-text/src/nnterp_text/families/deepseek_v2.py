"""DeepSeek-V2: DeepSeek-V3's block and names, its router a softmax taken greedily or within the best groups.

The router scores with a softmax and takes the top-k, without renormalizing,
times ``routed_scaling_factor``. Under ``topk_method="group_limited_greedy"``
it first keeps the ``topk_group`` groups with the highest single score
(``GROUP_SCORE = "max"``); under ``"greedy"`` it ignores ``n_group``.
"""

from nnterp import Moe

from .deepseek_v3 import ENVOYS as DEEPSEEK_V3
from .deepseek_v3 import RENAME  # noqa: F401 - the same names


class DeepseekV2Moe(Moe):
    NORMALIZE = False
    GROUP_SCORE = "max"

    def groups(self) -> tuple[int, int] | None:
        """``(groups, groups kept)`` under group-limited routing; None when the router is plain greedy."""
        if getattr(self.router._module, "topk_method", None) != "group_limited_greedy":
            return None
        return super().groups()


ENVOYS = {**DEEPSEEK_V3, "layers.*.mlp": DeepseekV2Moe}
