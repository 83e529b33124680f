"""Qwen3.5: Qwen3-VL's tower without DeepStack, over nnterp-recurrent's Qwen3.5 text model, under Qwen3_5ForConditionalGeneration.

A diff of Qwen3-VL: the same wrapper layout (``model.visual`` as
``model.vision``, its merger as ``model.projector``, ``Qwen3_5Model.forward``
scattering the merger's output, so it is the ``ImageScatter``), a tower with
learned position embeddings and per-image attention (``PER_IMAGE``) and no
DeepStack mergers; the text blocks are gated DeltaNet (``linear_attn``) and
gated attention blocks, served by nnterp-recurrent's Qwen3.5 family, whose
kernels ``route_kernels`` binds through ``MODELING``.
"""

from nnterp_recurrent.families import qwen3_5_text
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
from .qwen3_vl import RENAME as QWEN3_VL_RENAME
from .qwen3_vl import TASK

__all__ = ["ENVOYS", "MODELING", "RENAME", "TASK"]

MODELING = qwen3_5_text.MODELING
RENAME = {**qwen3_5_text.RENAME, **QWEN3_VL_RENAME}

ENVOYS = {
    Qwen3_5VisionModel: Qwen3Vision,
    Qwen3_5VisionBlock: QwenVisionLayer,
    Qwen3_5VisionAttention: QwenVisionAttention,
    Qwen3_5VisionMLP: QwenVisionMlp,
    Qwen3_5VisionPatchMerger: Qwen3Merger,
    Qwen3_5Model: ImageScatter,
    **qwen3_5_text.ENVOYS,
}
