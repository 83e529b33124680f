"""Qwen2.5-VL: Qwen2-VL's layout with a windowed Qwen ViT (RMS norms, gated MLPs), under Qwen2_5_VLForConditionalGeneration.

A diff of Qwen2-VL: the tower (``model.vision``, a ``QwenVision``) permutes its
patches into attention windows of ``window_size`` pixels at entry; the blocks
of ``fullatt_block_indexes`` attend per image, the others per window (one
interface call each, so ``attention_scores`` and ``attention_probabilities``
are Unavailable, ``PER_IMAGE``). Its blocks' values, ``tower_output`` and the
merger's (``model.projector``) input and output are in window order;
``patch_embeddings`` is before the permutation, in merge-block order, and the
tower restores the merge-block order after the merger, so ``image_features``
is the merger's output re-ordered. The tower's MLP is gated with the standard
names already; its width is the config's ``hidden_size`` (``out_hidden_size``
is the merger's output).
"""

from nnterp.families import default

from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    Qwen2_5_VisionTransformerPretrainedModel,
    Qwen2_5_VLMLP,
    Qwen2_5_VLModel,
    Qwen2_5_VLPatchMerger,
    Qwen2_5_VLVisionAttention,
    Qwen2_5_VLVisionBlock,
)

from ..components import ImageScatter
from ..components.qwen import QwenMerger, QwenVision, QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.qwen2_vl import QwenVLTinyConfig
from ..tiny.sizes import QWEN2_5_VL_VIT, QWEN_TEXT, QWEN_TOKENS
from .qwen2_vl import QWEN_VIT, QWEN_WRAPPER

FAMILY = VisionFamily(
    name="qwen2_5_vl",
    model_types=("qwen2_5_vl",),
    rename={**QWEN_WRAPPER, **QWEN_VIT},
    # the tower's by module type, as on LLaVA: "layers.*" matches the tower's native path too
    envoys={
        Qwen2_5_VisionTransformerPretrainedModel: QwenVision,
        Qwen2_5_VLVisionBlock: QwenVisionLayer,
        Qwen2_5_VLVisionAttention: QwenVisionAttention,
        Qwen2_5_VLMLP: QwenVisionMlp,
        Qwen2_5_VLPatchMerger: QwenMerger,
        Qwen2_5_VLModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # the checks' image: 4x6 patches, 6 image tokens; block 0 attends in 32-pixel windows
    tiny={
        "qwen2_5_vl": QwenVLTinyConfig(
            "qwen2_5_vl", {"text_config": QWEN_TEXT, "vision_config": QWEN2_5_VL_VIT, **QWEN_TOKENS}
        )
    },
    skips={
        "qwen2_5_vl": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
