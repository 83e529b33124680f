"""Qwen3.5-MoE: Qwen3-Next's blocks; its router renormalizes the top-k weights always, whatever the config says."""

from nnterp import GatedSharedMoe
from nnterp.tiny import TinyConfig

from ..tiny import DELTANET
from . import qwen3_next


class Qwen3_5Moe(GatedSharedMoe):
    NORMALIZE = True


FAMILY = qwen3_next.FAMILY.replace(
    name="qwen3_5_moe_text",
    model_types=("qwen3_5_moe_text",),
    modeling=("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",),
    envoys={**qwen3_next.FAMILY.envoys, "layers.*.mlp": Qwen3_5Moe},
    tiny={"qwen3_5_moe_text": TinyConfig("qwen3_5_moe_text", DELTANET)},
    skips={
        "qwen3_5_moe_text": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
