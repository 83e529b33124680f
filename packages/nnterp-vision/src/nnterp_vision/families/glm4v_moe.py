"""GLM-4.5V: GLM-4.1V's tower on a GLM-4-MoE text model, under Glm4vMoeForConditionalGeneration.

A diff of GLM-4.1V: the tower, its merger and the scatter are GLM-4.1V's
under the MoE module's class names (``Glm4vVision``, ``PER_IMAGE``). The
text model is GLM-4-MoE's (``glm4_moe``), not GLM-4's sandwich: a plain
pre-norm block, its first ``first_k_dense_replace`` blocks dense, the rest a
mixture with a sigmoid router choosing within groups by its
``e_score_correction_bias`` and a shared expert beside the routed ones,
served as nnterp-text's DeepSeek-V3 family serves GLM-4-MoE
(``SigmoidMoe``, the router ``gate`` aliased ``router``).
"""

from nnterp import SigmoidMoe
from nnterp.families import default

from transformers.models.glm4v_moe.modeling_glm4v_moe import (
    Glm4vMoeisionMlp,
    Glm4vMoeModel,
    Glm4vMoeVisionAttention,
    Glm4vMoeVisionBlock,
    Glm4vMoeVisionModel,
    Glm4vMoeVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.glm4v import Glm4vMerger, Glm4vVision
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.glm4v import TINY_MOE
from .qwen2_vl import QWEN_VIT, QWEN_WRAPPER

FAMILY = VisionFamily(
    name="glm4v_moe",
    model_types=("glm4v_moe",),
    # the tower's names as on GLM-4.1V; the text mixture's router under its standard name (the tower's MLPs have no gate)
    rename={**QWEN_WRAPPER, **QWEN_VIT, "mlp.gate": "mlp.router"},
    # the tower's by module type, as on GLM-4.1V (transformers spells its MLP ``Glm4vMoeisionMlp``); every text block's MLP
    # a mixture by path, as on GLM-4-MoE, so the dense first blocks say they are dense (type keys win, so the tower's are untouched)
    envoys={
        Glm4vMoeVisionModel: Glm4vVision,
        Glm4vMoeVisionBlock: QwenVisionLayer,
        Glm4vMoeVisionAttention: QwenVisionAttention,
        Glm4vMoeisionMlp: QwenVisionMlp,
        Glm4vMoeVisionPatchMerger: Glm4vMerger,
        Glm4vMoeModel: ImageScatter,
        **default.FAMILY.envoys,
        "layers.*.mlp": SigmoidMoe,
    },
    tiny={"glm4v_moe": TINY_MOE},
    skips={
        "glm4v_moe": {
            "projector_reads_the_selected_stream": "GLM-4V's merger takes the output of the tower's downsampling convolution",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
