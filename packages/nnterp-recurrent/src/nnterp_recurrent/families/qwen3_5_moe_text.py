"""Qwen3.5-MoE: Qwen3-Next's blocks; its router renormalizes the top-k weights always, whatever the config says."""

from nnterp_text.families.qwen2_moe import GatedSharedMoe

from .qwen3_next import ENVOYS as QWEN3_NEXT
from .qwen3_next import RENAME as RENAME


class Qwen3_5Moe(GatedSharedMoe):
    NORMALIZE = True


MODELING = ("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",)
ENVOYS = {**QWEN3_NEXT, "layers.*.mlp": Qwen3_5Moe}
