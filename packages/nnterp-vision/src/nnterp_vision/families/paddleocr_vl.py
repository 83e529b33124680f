"""PaddleOCR-VL: a packed SigLIP-named ViT, a merging projector and an ERNIE-4.5 text model on 3D rotary positions.

A diff of Qwen2-VL and LLaVA: the tower (``model.vision``, native
``model.model.visual``, a ``PaddleOcrVision``) runs every image's patches
in one row and attends per image (``PER_IMAGE``), as the Qwen ViT does, but
its modules carry SigLIP's names (``vision_model.encoder.layers``,
``layer_norm1``, ``out_proj``, ``fc1`` ...), aliased as on LLaVA, and it
merges nothing: the projector (``model.projector``, a ``PaddleOcrProjector``)
is outside it and folds each 2 x 2 merge block into one image token.
``PaddleOCRVLModel.forward`` scatters the projection into the token
embeddings (the ``ImageScatter``). The text model is ERNIE-4.5's, the
default block. The processor (``<|IMAGE_PLACEHOLDER|>``) needs no torchvision.
"""

from nnterp.families import default

from transformers.models.paddleocr_vl.modeling_paddleocr_vl import (
    PaddleOCRProjector,
    PaddleOCRVisionAttention,
    PaddleOCRVisionEncoderLayer,
    PaddleOCRVisionMLP,
    PaddleOCRVisionModel,
    PaddleOCRVLModel,
)

from ..components import ImageScatter
from ..components.paddleocr_vl import PaddleOcrProjector, PaddleOcrVision
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.paddleocr_vl import TINY
from . import llava
from .qwen2_vl import QWEN_WRAPPER

FAMILY = VisionFamily(
    name="paddleocr_vl",
    model_types=("paddleocr_vl",),
    # the text model as on Qwen2-VL; the tower's SigLIP names as on LLaVA, its blocks and patch embedding one level
    # further down (``model.visual.vision_model``, which transformers' CLIP and SigLIP towers no longer have); the
    # projector beside the tower
    rename={
        **{native: standard for native, standard in QWEN_WRAPPER.items() if not native.startswith("model.visual.")},
        **llava.CLIP_TOWER,
        "vision_model.encoder.layers": "layers",
        "vision_model.embeddings.patch_embedding": "patch_embed",
        "model.projector": "projector",
    },
    envoys={
        PaddleOCRVisionModel: PaddleOcrVision,
        PaddleOCRVisionEncoderLayer: QwenVisionLayer,
        PaddleOCRVisionAttention: QwenVisionAttention,
        PaddleOCRVisionMLP: QwenVisionMlp,
        PaddleOCRProjector: PaddleOcrProjector,
        PaddleOCRVLModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={"paddleocr_vl": TINY},
    skips={
        "paddleocr_vl": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
