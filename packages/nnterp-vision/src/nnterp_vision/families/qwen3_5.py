"""Qwen3.5: Qwen3-VL's tower without DeepStack, over nnterp-recurrent's Qwen3.5 text model, under Qwen3_5ForConditionalGeneration.

A diff of Qwen3-VL: the same wrapper layout (``model.visual`` as
``model.vision``, its merger as ``model.projector``, ``Qwen3_5Model.forward``
scattering the merger's output, so it is the ``ImageScatter``), a tower with
learned position embeddings and per-image attention (``PER_IMAGE``) and no
DeepStack mergers; the text blocks are gated DeltaNet (``linear_attn``) and
gated attention blocks, served by nnterp-recurrent's Qwen3.5 family, whose
kernels ``route_kernels`` binds through its ``modeling`` (found by ``text_family``).
"""

from transformers.models.qwen3_5.modeling_qwen3_5 import (
    Qwen3_5Model,
    Qwen3_5VisionAttention,
    Qwen3_5VisionBlock,
    Qwen3_5VisionMLP,
    Qwen3_5VisionModel,
    Qwen3_5VisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger, Qwen3Vision
from ..family import VisionFamily
from ..tiny.qwen3_vl import Qwen3VLTinyConfig
from ..tiny.sizes import QWEN3_5_TEXT, QWEN3_VL_VIT, QWEN_TOKENS
from . import qwen3_vl


def checkpoint(model_type: str) -> Qwen3VLTinyConfig:
    """Qwen3-VL's tower without DeepStack over gated DeltaNet blocks; 6 image tokens for the checks' image."""
    return Qwen3VLTinyConfig(
        model_type,
        {
            "text_config": QWEN3_5_TEXT,
            "vision_config": {k: v for k, v in QWEN3_VL_VIT.items() if k != "deepstack_visual_indexes"},
            **QWEN_TOKENS,
        },
        load={"attn_implementation": "eager"},
    )


FAMILY = VisionFamily(
    name="qwen3_5",
    model_types=("qwen3_5",),
    rename=qwen3_vl.FAMILY.rename,
    envoys={
        Qwen3_5VisionModel: Qwen3Vision,
        Qwen3_5VisionBlock: QwenVisionLayer,
        Qwen3_5VisionAttention: QwenVisionAttention,
        Qwen3_5VisionMLP: QwenVisionMlp,
        Qwen3_5VisionPatchMerger: Qwen3Merger,
        Qwen3_5Model: ImageScatter,
    },
    # the text blocks and the kernels route_kernels binds: the recurrent text family's
    text_family="qwen3_5_text",
    tiny={"qwen3_5": checkpoint("qwen3_5")},
    skips={
        "qwen3_5": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
