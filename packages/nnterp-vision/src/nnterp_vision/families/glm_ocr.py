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

from transformers.models.glm4v.modeling_glm4v import Glm4vTextAttention, Glm4vTextMLP
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
from ..tiny.glm4v import GLM4V_TEXT, GLM4V_VIT, GLM_TOKEN_IDS, Glm4vTinyConfig
from . import glm4v

FAMILY = glm4v.FAMILY.replace(
    name="glm_ocr",
    model_types=("glm_ocr",),
    envoys={
        **glm4v.FAMILY.envoys,
        GlmOcrVisionModel: GlmOcrVision,
        GlmOcrVisionBlock: QwenVisionLayer,
        GlmOcrVisionAttention: QwenVisionAttention,
        GlmOcrVisionMlp: QwenVisionMlp,
        GlmOcrVisionPatchMerger: Glm4vMerger,
        GlmOcrModel: ImageScatter,
        GlmOcrTextAttention: glm4v.FAMILY.envoys[Glm4vTextAttention],
        GlmOcrTextMLP: glm4v.FAMILY.envoys[Glm4vTextMLP],
    },
    # GLM-4.1V's tiny tower (q and k norms, no learned positions) and processor; 6 image tokens
    tiny={
        "glm_ocr": Glm4vTinyConfig("glm_ocr", {"text_config": GLM4V_TEXT, "vision_config": GLM4V_VIT, **GLM_TOKEN_IDS})
    },
    skips={
        "glm_ocr": {
            "projector_reads_the_selected_stream": "GLM-4V's merger takes the output of the tower's downsampling convolution",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
