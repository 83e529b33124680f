"""AXK2: DeepSeek's latent attention with a sigmoid gate on the heads before ``o_proj``: served as Laguna is.

Its sparse blocks are DeepSeek-V3's mixture but for one line: grouped routing
(only where ``n_group`` is set) fills the dropped groups' scores with 0, not
-inf, so a kept expert whose biased score is negative can lose to a dropped one.
"""

from nnterp import SigmoidMoe, TinyConfig

from torch import Tensor

from ..tiny import GROUPED_ROUTE, INDEXER, MLA, ROUTE, SPARSE
from . import laguna


class Axk2Moe(SigmoidMoe):
    def _within_kept_groups(self, choice: Tensor, groups: int, kept: int) -> Tensor:
        dropped = super()._within_kept_groups(choice, groups, kept).isinf()
        return choice.masked_fill(dropped, 0.0)


FAMILY = laguna.FAMILY.replace(
    name="axk2",
    model_types=("axk2",),
    envoys={**laguna.FAMILY.envoys, "layers.*.mlp": Axk2Moe},
    tiny={
        "axk2": TinyConfig("axk2", {**MLA, **ROUTE, **SPARSE, **INDEXER, "num_hidden_layers": 3}),
        "axk2-grouped": TinyConfig("axk2", {**MLA, **GROUPED_ROUTE, **SPARSE, **INDEXER, "num_hidden_layers": 3}),
    },
)
