"""HunYuan-MoE: OLMoE's mixture, its router ``gate`` making the logits in its ``wg`` projection and always renormalizing.

``shared_mlp`` (aliased ``shared_experts``) runs on every token beside the
routed experts.
"""

from nnterp import Moe, TinyConfig

from . import olmoe


class HunYuanMoe(Moe):
    LOGITS = "router.wg"
    NORMALIZE = True


FAMILY = olmoe.FAMILY.replace(
    name="hunyuan_v1_moe",
    model_types=("hunyuan_v1_moe",),
    rename={**olmoe.FAMILY.rename, "mlp.shared_mlp": "mlp.shared_experts"},
    envoys={**olmoe.FAMILY.envoys, "layers.*.mlp": HunYuanMoe},
    tiny={
        "hunyuan_v1_moe": TinyConfig(
            "hunyuan_v1_moe", {"num_hidden_layers": 3, "head_dim": 16, "num_experts": 4, "moe_topk": 2}
        )
    },
    skips={
        "hunyuan_v1_moe": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
