"""HunYuan-MoE: OLMoE's mixture, its router ``gate`` making the logits in its ``wg`` projection and always renormalizing.

``shared_mlp`` (aliased ``shared_experts``) runs on every token beside the
routed experts.
"""

from nnterp import Moe

from .olmoe import ENVOYS as OLMOE
from .olmoe import RENAME as OLMOE_NAMES

RENAME = {**OLMOE_NAMES, "mlp.shared_mlp": "mlp.shared_experts"}


class HunYuanMoe(Moe):
    LOGITS = "router.wg"
    NORMALIZE = True


ENVOYS = {**OLMOE, "layers.*.mlp": HunYuanMoe}
