"""GLM-4.6V on GLM-4.5V's MoE text model (``text_config.model_type == "glm4v_moe_text"``): named by ``glm46v.for_config``.

A diff of GLM-4.5V: its names, its tower and its text mixtures (``SigmoidMoe``
by path, the router ``gate`` aliased ``router``), under ``Glm46VModel``'s
scatter. The tower may be either GLM-4V tower type; both are keyed.
"""

from transformers.models.glm4v.modeling_glm4v import (
    Glm4VisionMlp,
    Glm4vVisionAttention,
    Glm4vVisionBlock,
    Glm4vVisionModel,
    Glm4vVisionPatchMerger,
)
from transformers.models.glm46v.modeling_glm46v import Glm46VModel

from ..components import ImageScatter
from ..tiny.glm4v import TINY_46V_MOE
from . import glm4v, glm4v_moe

#: GLM-4.5V's names and components, GLM-4.1V's tower types beside them, and the scatter; no model type of its own
FAMILY = glm4v_moe.FAMILY.replace(
    name="glm46v_moe",
    envoys={
        **{
            key: glm4v.FAMILY.envoys[key]
            for key in (Glm4vVisionModel, Glm4vVisionBlock, Glm4vVisionAttention, Glm4VisionMlp, Glm4vVisionPatchMerger)
        },
        **glm4v_moe.FAMILY.envoys,
        Glm46VModel: ImageScatter,
    },
    # GLM-4.6V on GLM-4.5V's MoE text model: served here, which glm46v's for_config names
    tiny={"glm46v_moe": TINY_46V_MOE},
    skips={
        "glm46v_moe": {
            "projector_reads_the_selected_stream": "GLM-4V's merger takes the output of the tower's downsampling convolution",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
