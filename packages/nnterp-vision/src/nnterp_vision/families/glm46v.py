"""GLM-4.6V: GLM-4.1V's wrapper around whichever tower and text model its config names, under Glm46VForConditionalGeneration.

A diff of GLM-4.1V: ``Glm46VModel`` builds its tower and text model from
their configs' model types. With GLM-4.1V's (``glm4v_vision``, ``glm4v_text``,
the defaults: GLM-4.6V-Flash) this module serves it as GLM-4.1V: the tower a
``Glm4vVision`` (packed, ``PER_IMAGE``, its final norm ``tower_output``), the
text model GLM-4's sandwich block. With GLM-4.5V's MoE text model
(``glm4v_moe_text``: GLM-4.6V) ``for_config`` names ``glm46v_moe``.
``Glm46VModel.forward`` scatters the merger's output (the ``ImageScatter``).
"""

from nnterp import Family

from transformers.models.glm46v.modeling_glm46v import Glm46VModel

from ..components import ImageScatter
from ..tiny.glm4v import TINY_46V
from . import glm4v


def for_config(config: dict) -> Family | None:
    """``glm46v_moe`` where the text model is GLM-4.5V's mixture (GLM-4.6V); this family else."""
    if (config.get("text_config") or {}).get("model_type") == "glm4v_moe_text":
        from . import glm46v_moe

        return glm46v_moe.FAMILY
    return None


FAMILY = glm4v.FAMILY.replace(
    name="glm46v",
    model_types=("glm46v",),
    envoys={**glm4v.FAMILY.envoys, Glm46VModel: ImageScatter},
    for_config=for_config,
    tiny={"glm46v": TINY_46V},
    skips={
        "glm46v": {
            "projector_reads_the_selected_stream": "GLM-4V's merger takes the output of the tower's downsampling convolution",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
