"""DeepSeek-V2: DeepSeek-V3's block and names, its router a softmax taken greedily or within the best groups.

The router scores with a softmax and takes the top-k, without renormalizing,
times ``routed_scaling_factor``. Under ``topk_method="group_limited_greedy"``
it first keeps the ``topk_group`` groups with the highest single score
(``GROUP_SCORE = "max"``); under ``"greedy"`` it ignores ``n_group``.
"""

from nnterp import Moe, TinyConfig

from ..tiny import GROUPED_ROUTE, MLA, ROUTE
from . import deepseek_v3


class DeepseekV2Moe(Moe):
    NORMALIZE = False
    GROUP_SCORE = "max"

    def groups(self) -> tuple[int, int] | None:
        """``(groups, groups kept)`` under group-limited routing; None when the router is plain greedy."""
        if getattr(self.router._module, "topk_method", None) != "group_limited_greedy":
            return None
        return super().groups()


FAMILY = deepseek_v3.FAMILY.replace(
    name="deepseek_v2",
    model_types=("deepseek_v2",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*.mlp": DeepseekV2Moe},
    tiny={
        "deepseek_v2": TinyConfig(
            "deepseek_v2",
            {**MLA, **ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1, "num_experts_per_tok": 2},
        ),
        # grouped routing: eight experts in four groups, the best two groups kept, two experts chosen
        # group_limited_greedy: the best single score picks the groups; scaled
        "deepseek_v2-grouped": TinyConfig(
            "deepseek_v2",
            {
                **MLA,
                **GROUPED_ROUTE,
                "topk_method": "group_limited_greedy",
                "routed_scaling_factor": 2.5,
                "num_hidden_layers": 3,
                "first_k_dense_replace": 1,
            },
        ),
    },
)
