"""GLM-OCR: GLM-4.1V under its own class names (GlmOcr*), with q and k RMS norms in the tower's attention.

A diff of GLM-4.1V: the same wrapper, packed tower, downsampling
convolution, merger and GLM-4 sandwich text model, keyed on GLM-OCR's
module types. The tower's attention norms each head's queries and keys
before the 2D rotary embedding (``attention_queries`` and ``attention_keys``
are read after both, as on GLM-4V), the tower drops the learned position
embeddings, and its blocks' MLP is ``intermediate_size`` wide
(``GlmOcrVision``). The text attention's grouped q, k and v projections are
the keys GLM-4's attention already reads. The processor is GLM-4.1V's.
"""

from transformers.models.glm_ocr.modeling_glm_ocr import (
    GlmOcrModel,
    GlmOcrTextAttention,
    GlmOcrTextMLP,
    GlmOcrVisionAttention,
    GlmOcrVisionBlock,
    GlmOcrVisionMlp,
    GlmOcrVisionModel,
    GlmOcrVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.glm4v import Glm4vMerger
from ..components.glm_ocr import GlmOcrVision
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from . import glm4v
from .glm4v import RENAME, TASK

__all__ = ["ENVOYS", "RENAME", "TASK"]

ENVOYS = {
    **glm4v.ENVOYS,
    GlmOcrVisionModel: GlmOcrVision,
    GlmOcrVisionBlock: QwenVisionLayer,
    GlmOcrVisionAttention: QwenVisionAttention,
    GlmOcrVisionMlp: QwenVisionMlp,
    GlmOcrVisionPatchMerger: Glm4vMerger,
    GlmOcrModel: ImageScatter,
    GlmOcrTextAttention: glm4v.ENVOYS[glm4v.Glm4vTextAttention],
    GlmOcrTextMLP: glm4v.ENVOYS[glm4v.Glm4vTextMLP],
}
