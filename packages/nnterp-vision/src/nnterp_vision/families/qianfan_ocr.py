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
from ..tiny.qianfan_ocr import TINY
from . import internvl

FAMILY = internvl.FAMILY.replace(
    name="qianfan_ocr",
    model_types=("qianfan_ocr",),
    envoys={
        **{key: value for key, value in internvl.FAMILY.envoys.items() if isinstance(key, str)},
        QianfanOCRVisionModel: InternVision,
        QianfanOCRVisionLayer: VisionLayer,
        QianfanOCRVisionAttention: LayerScaledAttention,
        QianfanOCRVisionMLP: LayerScaledMlp,
        QianfanOCRModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # the tower reads its drop-path rates with .item() while it builds, which a meta build refuses: load dispatched
    load_defaults={"dispatch": True},
    # InternVL's tiny tower and tiling on a Qwen3 text model; 4 image tokens per crop
    tiny={"qianfan_ocr": TINY},
)
