"""HyperCLOVA X Vision: Qwen2.5-VL's tower, a linear projector after its merger and a HyperCLOVA X text model, under HyperCLOVAXVisionV2ForConditionalGeneration.

A diff of Qwen2.5-VL: the tower (``model.vision_model`` as ``model.vision``,
a ``QwenVision``, windows and ``PER_IMAGE`` as there) ends in its own merger;
the wrapper's ``projector`` (a ``FlatProjector``: one linear over every image
token's merged row) maps that to the text width, and
``HyperCLOVAXVisionV2Model.forward`` scatters the result (the
``ImageScatter``). The text model multiplies its whole input by
``embedding_multiplier`` before layer 0, so ``image_features`` is the
scatter's argument times that factor (a write is divided back): what layer 0
receives at the image tokens. The text blocks are nnterp-text's HyperCLOVA X
family's (post-sublayer norms scaled by ``residual_multiplier``, logits by
``logits_scaling``); its positions are one-dimensional.
"""

from typing import Any

from transformers.models.hyperclovax_vision_v2.modeling_hyperclovax_vision_v2 import HyperCLOVAXVisionV2Model
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    Qwen2_5_VisionTransformerPretrainedModel,
    Qwen2_5_VLMLP,
    Qwen2_5_VLPatchMerger,
    Qwen2_5_VLVisionAttention,
    Qwen2_5_VLVisionBlock,
)

from ..components import ImageScatter
from ..components.projector import FlatProjector
from ..components.qwen import QwenMerger, QwenVision, QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.qwen2_vl import QwenVLTinyConfig
from ..tiny.sizes import QWEN2_5_VL_VIT, QWEN_TOKENS, TEXT
from .qwen2_vl import QWEN_VIT


def embedding_multiplier(envoy: Any) -> float:
    """The factor the text model applies to its input embeddings, the scattered features among them."""
    return float(envoy.root.text_config.embedding_multiplier)


class HyperClovaXVision(QwenVision):
    """The Qwen ViT whose ``image_features`` are what layer 0 receives: the scattered projection times ``embedding_multiplier``."""

    image_features = QwenVision.image_features.scaled(embedding_multiplier)


FAMILY = VisionFamily(
    name="hyperclovax_vision_v2",
    model_types=("hyperclovax_vision_v2",),
    rename={
        "model.language_model.layers": "layers",
        "model.language_model.embed_tokens": "embed_tokens",
        "model.language_model.norm": "norm",
        "model.vision_model": "vision",
        "model.projector": "projector",
        **QWEN_VIT,
    },
    envoys={
        Qwen2_5_VisionTransformerPretrainedModel: HyperClovaXVision,
        Qwen2_5_VLVisionBlock: QwenVisionLayer,
        Qwen2_5_VLVisionAttention: QwenVisionAttention,
        Qwen2_5_VLMLP: QwenVisionMlp,
        Qwen2_5_VLPatchMerger: QwenMerger,
        "model.projector": FlatProjector,
        HyperCLOVAXVisionV2Model: ImageScatter,
    },
    # the text blocks and the logits times logits_scaling: the HyperCLOVA X text family's
    text_family="hyperclovax",
    tiny={
        # Qwen2.5-VL's tower, a linear projector after its merger, a HyperCLOVA X text model (its multipliers away from 1)
        "hyperclovax_vision_v2": QwenVLTinyConfig(
            "hyperclovax_vision_v2",
            {
                "text_config": {
                    **TEXT,
                    "model_type": "hyperclovax",
                    "residual_multiplier": 0.7,
                    "logits_scaling": 0.5,
                    "embedding_multiplier": 1.3,
                },
                "vision_config": QWEN2_5_VL_VIT,
                **QWEN_TOKENS,
            },
            load={"attn_implementation": "eager"},
        ),
    },
    skips={
        "hyperclovax_vision_v2": {
            "projector_reads_the_selected_stream": "a flat projector takes what the tower's own merger returns",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
