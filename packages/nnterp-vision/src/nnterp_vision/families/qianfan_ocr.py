"""Qianfan-OCR: InternVL's wrapper, InternViT tower and MLP projector on a Qwen3 text model, under QianfanOCRForConditionalGeneration.

A diff of InternVL: the same modules under Qianfan-OCR's class names, the
tower's blocks in ``vision_tower.layers`` (already the standard name) and
each with a stochastic-depth step (an identity at inference) after the layer
scale, so the contributions are still ``lambda_1 * attention(...)`` and
``lambda_2 * mlp(...)``. ``QianfanOCRModel.forward`` scatters the projection
(the ``ImageScatter``). The processor expands ``image_placeholder_token``
(not ``<IMG_CONTEXT>``, its ``image_token``) into ``<img>``,
``<IMG_CONTEXT>`` per image token, ``</img>``.
"""

from nnterp.families import default
from transformers.models.qianfan_ocr.modeling_qianfan_ocr import (
    QianfanOCRModel,
    QianfanOCRVisionAttention,
    QianfanOCRVisionLayer,
    QianfanOCRVisionMLP,
    QianfanOCRVisionModel,
)

from ..components import ImageScatter, VisionLayer
from ..components.internvl import InternVision, LayerScaledAttention, LayerScaledMlp
from .internvl import ENVOYS as INTERNVL_ENVOYS
from .internvl import RENAME, TASK

__all__ = ["BUILDS_ONLY_DISPATCHED", "ENVOYS", "RENAME", "TASK"]

#: the tower reads its drop-path rates with .item() while it builds, which a meta build refuses: core loads dispatched
BUILDS_ONLY_DISPATCHED = True

ENVOYS = {
    **{key: value for key, value in INTERNVL_ENVOYS.items() if isinstance(key, str)},
    QianfanOCRVisionModel: InternVision,
    QianfanOCRVisionLayer: VisionLayer,
    QianfanOCRVisionAttention: LayerScaledAttention,
    QianfanOCRVisionMLP: LayerScaledMlp,
    QianfanOCRModel: ImageScatter,
    **default.ENVOYS,
}
