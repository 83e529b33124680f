"""GLM-4.6V on GLM-4.5V's MoE text model (``text_config.model_type == "glm4v_moe_text"``): named by ``glm46v.for_config``.

A diff of GLM-4.5V: its names, its tower and its text mixtures (``SigmoidMoe``
by path, the router ``gate`` aliased ``router``), under ``Glm46VModel``'s
scatter. The tower may be either GLM-4V tower type; both are keyed.
"""

from transformers.models.glm46v.modeling_glm46v import Glm46VModel
from transformers.models.glm4v.modeling_glm4v import (
    Glm4VisionMlp,
    Glm4vVisionAttention,
    Glm4vVisionBlock,
    Glm4vVisionModel,
    Glm4vVisionPatchMerger,
)

from ..components import ImageScatter
from . import glm4v, glm4v_moe
from .glm4v_moe import RENAME, TASK

__all__ = ["ENVOYS", "RENAME", "TASK"]

#: GLM-4.5V's, GLM-4.1V's tower types beside them, and the scatter
ENVOYS = {
    **{
        key: glm4v.ENVOYS[key]
        for key in (Glm4vVisionModel, Glm4vVisionBlock, Glm4vVisionAttention, Glm4VisionMlp, Glm4vVisionPatchMerger)
    },
    **glm4v_moe.ENVOYS,
    Glm46VModel: ImageScatter,
}
