"""EXAONE 4.5: Qwen2.5-VL's windowed tower with grouped-query attention and an EXAONE 4 text model, under Exaone4_5_ForConditionalGeneration.

A diff of Qwen2.5-VL: the same wrapper layout (``model.visual`` as
``model.vision``, its merger as ``model.projector``,
``Exaone4_5_Model.forward`` scattering the merger's output) and a tower whose
one ``qkv`` projection splits into queries and fewer key/value heads
(``num_key_value_heads``), so ``attention_keys`` and ``attention_values``
have ``num_kv_heads`` heads; windows and ``PER_IMAGE`` as on Qwen2.5-VL. The
text blocks are nnterp-text's EXAONE 4 family's (OLMo-2's post-norms), with
one-dimensional positions.
"""

from transformers.models.exaone4_5.modeling_exaone4_5 import (
    Exaone4_5_MLP,
    Exaone4_5_Model,
    Exaone4_5_PatchMerger,
    Exaone4_5_VisionAttention,
    Exaone4_5_VisionBlock,
    Exaone4_5_VisionModel,
)

from ..components import ImageScatter
from ..components.qwen import QwenMerger, QwenVision, QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.qwen2_vl import QwenVLTinyConfig
from ..tiny.sizes import QWEN2_5_VL_VIT, QWEN_TOKENS, TEXT
from . import qwen2_5_vl

FAMILY = VisionFamily(
    name="exaone4_5",
    model_types=("exaone4_5",),
    rename=qwen2_5_vl.FAMILY.rename,
    envoys={
        Exaone4_5_VisionModel: QwenVision,
        Exaone4_5_VisionBlock: QwenVisionLayer,
        Exaone4_5_VisionAttention: QwenVisionAttention,
        Exaone4_5_MLP: QwenVisionMlp,
        Exaone4_5_PatchMerger: QwenMerger,
        Exaone4_5_Model: ImageScatter,
    },
    # the text blocks: EXAONE 4's, OLMo-2's post-norms
    text_family="exaone4",
    tiny={
        # Qwen2.5-VL's tower with two key/value heads for four query heads, over an EXAONE 4 text model
        "exaone4_5": QwenVLTinyConfig(
            "exaone4_5",
            {
                "text_config": {**TEXT, "model_type": "exaone4"},
                "vision_config": {**QWEN2_5_VL_VIT, "num_key_value_heads": 2},
                **QWEN_TOKENS,
            },
            load={"attn_implementation": "eager"},
        ),
    },
    skips={
        "exaone4_5": {
            "norm_outputs_feed_the_sublayers": "a post-norm block",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
