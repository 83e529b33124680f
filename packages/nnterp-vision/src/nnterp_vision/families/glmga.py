"""GLMGA: GLM-4.6V's class (Glm46VForConditionalGeneration) under its own config type, served as GLM-4.6V.

No diff at all: ``GlmgaConfig`` subclasses ``Glm46VConfig`` (GLM-4.1V's
tower and text model, ``glm4v_vision`` and ``glm4v_text``, by default), and
transformers' auto mappings build ``Glm46VModel`` from it, so the modules are
GLM-4.6V's and ``glm46v``'s tables name them; ``for_config`` names
``glm46v_moe`` where the text model is GLM-4.5V's mixture. Only the image and
video processors are the type's own (a ``patch_expand_factor`` on the resize
grid, 1 by default).
"""

from ..tiny.glmga import TINY
from . import glm46v

FAMILY = glm46v.FAMILY.replace(
    name="glmga",
    model_types=("glmga",),
    tiny={"glmga": TINY},
    skips={
        "glmga": {
            "projector_reads_the_selected_stream": "GLM-4V's merger takes the output of the tower's downsampling convolution",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
