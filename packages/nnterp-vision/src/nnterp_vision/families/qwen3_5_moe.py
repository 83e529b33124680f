"""Qwen3.5-MoE: Qwen3.5's wrapper and tower over nnterp-recurrent's Qwen3.5-MoE text model."""

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
from . import qwen3_5

FAMILY = qwen3_5.FAMILY.replace(
    name="qwen3_5_moe",
    model_types=("qwen3_5_moe",),
    envoys={
        Qwen3_5MoeVisionModel: Qwen3Vision,
        Qwen3_5MoeVisionBlock: QwenVisionLayer,
        Qwen3_5MoeVisionAttention: QwenVisionAttention,
        Qwen3_5MoeVisionMLP: QwenVisionMlp,
        Qwen3_5MoeVisionPatchMerger: Qwen3Merger,
        Qwen3_5MoeModel: ImageScatter,
    },
    text_family="qwen3_5_moe_text",
    tiny={"qwen3_5_moe": qwen3_5.checkpoint("qwen3_5_moe")},
    skips={
        "qwen3_5_moe": {
            "neurons_make_contribution": "a mixture of experts",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
