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

from nnterp_text.families import olmo2
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
from .qwen2_vl import QWEN_VIT_RENAME, TASK, WRAPPER_RENAME

__all__ = ["ENVOYS", "RENAME", "TASK"]

RENAME = {**olmo2.RENAME, **WRAPPER_RENAME, **QWEN_VIT_RENAME}

ENVOYS = {
    Exaone4_5_VisionModel: QwenVision,
    Exaone4_5_VisionBlock: QwenVisionLayer,
    Exaone4_5_VisionAttention: QwenVisionAttention,
    Exaone4_5_MLP: QwenVisionMlp,
    Exaone4_5_PatchMerger: QwenMerger,
    Exaone4_5_Model: ImageScatter,
    **olmo2.ENVOYS,
}
