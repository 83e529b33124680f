"""Cohere Compass: Qwen3-VL's layout (its tower, merger and DeepStack mergers under Compass's names) over a Cohere text model.

A diff of Qwen3-VL: ``model.visual`` is ``model.vision`` (a ``Qwen3Vision``:
packed, per image, ``PER_IMAGE``), its merger ``model.projector``,
``CohereCompassModel.forward`` the ``ImageScatter``, and the DeepStack
mergers' outputs are added after the first text layers as on Qwen3-VL. The
text blocks are nnterp-text's Cohere family's (one-norm parallel blocks), and
the wrapper multiplies the logits by ``logit_scale`` as the text model does.
"""

from transformers.models.cohere_compass.modeling_cohere_compass import (
    CohereCompassModel,
    CohereCompassVisionAttention,
    CohereCompassVisionBlock,
    CohereCompassVisionMLP,
    CohereCompassVisionModel,
    CohereCompassVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger, Qwen3Vision
from ..family import VisionFamily
from ..tiny.glm4v import Glm4vTinyConfig
from ..tiny.sizes import QWEN3_TEXT, QWEN3_VL_VIT
from . import qwen3_vl

#: Cohere Compass's processor tokens, in the order the tokenizer gains them, and the config fields naming their ids
COMPASS_TOKENS = {
    "<|IMAGE_PAD|>": "image_token_id",
    "<|VIDEO_PAD|>": "video_token_id",
    "<|VISION_START|>": "vision_start_token_id",
    "<|VISION_END|>": "vision_end_token_id",
}
COMPASS_TOKEN_IDS = {field: 300 + index for index, field in enumerate(COMPASS_TOKENS.values())}

FAMILY = VisionFamily(
    name="cohere_compass",
    model_types=("cohere_compass",),
    rename=qwen3_vl.FAMILY.rename,
    envoys={
        CohereCompassVisionModel: Qwen3Vision,
        CohereCompassVisionBlock: QwenVisionLayer,
        CohereCompassVisionAttention: QwenVisionAttention,
        CohereCompassVisionMLP: QwenVisionMlp,
        CohereCompassVisionPatchMerger: Qwen3Merger,
        CohereCompassModel: ImageScatter,
    },
    # the text blocks, and the logits scaled by logit_scale (the wrapper scales them too): the Cohere text family's
    text_family="cohere_compass_text",
    tiny={
        # Qwen3-VL's tower and DeepStack (its own processor and tokens) over a Cohere text model; 6 image tokens
        "cohere_compass": Glm4vTinyConfig(
            "cohere_compass",
            {
                # rope parameters per layer type; 3D positions over each 16-wide head, interleaved as on Qwen3-VL
                "text_config": {
                    "head_dim": 16,
                    "logit_scale": 0.5,
                    "rope_parameters": {"full_attention": QWEN3_TEXT["rope_parameters"]},
                },
                "vision_config": QWEN3_VL_VIT,
                **COMPASS_TOKEN_IDS,
            },
            pixels=(16 * 16 * 4, 48 * 48),
            processor=("cohere_compass", "CohereCompass"),
            tokens=tuple(COMPASS_TOKENS.items()),
        ),
    },
    skips={
        "cohere_compass": {
            "mid_stream": "a parallel block",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
