"""LLaVA-OneVision-1.5: EXAONE 4.5's wrapper over a Qwen3 text model, its tower a Qwen ViT with a class row per frame.

A diff of EXAONE 4.5 (itself Qwen2.5-VL's layout): the tower is ``model.vision``
(native ``model.model.visual``), packed, its merger (Qwen3-VL's, one norm
before the merge) ``model.projector``, and ``Exaone4_5_Model.forward``, which
``LlavaOnevision15Model`` inherits, scatters the merger's output on
one-dimensional positions. The tower patches each frame with a 2D convolution
(no temporal depth), prepends a learned class row to each image's patches
(with its own rotary frequencies), norms the stream (``pre_layernorm``) and
runs its blocks with every image's class row in place, so the blocks' values
have one row per patch and one per image; after the last block it drops the
class rows, and ``tower_output`` (what the merger takes) has one row per
patch. The blocks are GLM-Image's pre-LN ViT blocks (LayerNorms, the Qwen
ViT's attention, an ungated ``fc1`` / ``fc2`` MLP), attending per image
(``PER_IMAGE``). The text blocks are Qwen3's (the default family).
"""

from nnterp.families import default

from transformers.models.llava_onevision1_5.modeling_llava_onevision1_5 import (
    LlavaOnevision15Model,
    LlavaOnevision15VisionAttention,
    LlavaOnevision15VisionBlock,
    LlavaOnevision15VisionMLP,
    LlavaOnevision15VisionModel,
    LlavaOnevision15VisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVision, QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger
from ..tiny.qwen2_vl import QwenVLTinyConfig
from ..tiny.sizes import QWEN_TOKENS, TEXT
from ..tiny.sizes import QWEN_VIT as VIT  # a Qwen ViT without frames in depth or windows
from . import exaone4_5

#: GLM-Image's ViT MLP names
FC_MLP = {"fc1": "up_proj", "fc2": "down_proj", "activation_fn": "act_fn"}

FAMILY = exaone4_5.FAMILY.replace(
    name="llava_onevision1_5",
    model_types=("llava_onevision1_5",),
    rename={**exaone4_5.FAMILY.rename, **FC_MLP},
    envoys={
        LlavaOnevision15VisionModel: QwenVision,
        LlavaOnevision15VisionBlock: QwenVisionLayer,
        LlavaOnevision15VisionAttention: QwenVisionAttention,
        LlavaOnevision15VisionMLP: QwenVisionMlp,
        LlavaOnevision15VisionPatchMerger: Qwen3Merger,
        LlavaOnevision15Model: ImageScatter,
        **default.FAMILY.envoys,
    },
    text_family=None,
    tiny={
        "llava_onevision1_5": QwenVLTinyConfig(
            "llava_onevision1_5",
            {"text_config": {**TEXT, "model_type": "qwen3"}, "vision_config": VIT, **QWEN_TOKENS},
            load={"attn_implementation": "eager"},
        ),
    },
    skips={
        "llava_onevision1_5": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
