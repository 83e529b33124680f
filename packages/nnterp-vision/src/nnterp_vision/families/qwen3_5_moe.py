"""Qwen3.5-MoE: Qwen3.5's wrapper and tower over nnterp-recurrent's Qwen3.5-MoE text model."""

from nnterp_recurrent.families import qwen3_5_moe_text
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
    Qwen3_5MoeModel,
    Qwen3_5MoeVisionAttention,
    Qwen3_5MoeVisionBlock,
    Qwen3_5MoeVisionMLP,
    Qwen3_5MoeVisionModel,
    Qwen3_5MoeVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger, Qwen3Vision
from .qwen3_vl import RENAME as QWEN3_VL_RENAME
from .qwen3_vl import TASK

__all__ = ["ENVOYS", "MODELING", "RENAME", "TASK"]

MODELING = qwen3_5_moe_text.MODELING
RENAME = {**qwen3_5_moe_text.RENAME, **QWEN3_VL_RENAME}

ENVOYS = {
    Qwen3_5MoeVisionModel: Qwen3Vision,
    Qwen3_5MoeVisionBlock: QwenVisionLayer,
    Qwen3_5MoeVisionAttention: QwenVisionAttention,
    Qwen3_5MoeVisionMLP: QwenVisionMlp,
    Qwen3_5MoeVisionPatchMerger: Qwen3Merger,
    Qwen3_5MoeModel: ImageScatter,
    **qwen3_5_moe_text.ENVOYS,
}
