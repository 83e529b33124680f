"""GLM-4.1V: a Qwen-like ViT with its merger inside, and a GLM-4 text model on 3D rotary positions, under Glm4vForConditionalGeneration.

A diff of Qwen2-VL: the tower (``model.vision``, a ``Glm4vVision``) is the
packed Qwen ViT (blocks ``norm1`` / ``attn`` / ``norm2`` / ``mlp`` aliased as
there, its gated MLP already under the standard names, its attention one
interface call per image: ``PER_IMAGE``) with a final norm, whose output is
``tower_output``, and a strided convolution folding each merge block into
one row before the merger (``model.projector``, a ``Glm4vMerger``).
``Glm4vModel.forward`` scatters the merger's output into the token
embeddings (the ``ImageScatter``). The text model is GLM-4's sandwich block
(a norm on each sublayer's output, which is the contribution), served as
nnterp-text's GLM-4 family serves it, keyed on the text modules' types.
The processor (``<|image|>`` placeholders, ``mm_token_type_ids`` for the 3D
positions) needs torchvision for its video processor.
"""

from nnterp import Glm4Attention, Glm4Mlp
from nnterp.families import default

from transformers.models.glm4v.modeling_glm4v import (
    Glm4VisionMlp,
    Glm4vModel,
    Glm4vTextAttention,
    Glm4vTextMLP,
    Glm4vVisionAttention,
    Glm4vVisionBlock,
    Glm4vVisionModel,
    Glm4vVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.glm4v import Glm4vMerger, Glm4vVision
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.glm4v import TINY
from .qwen2_vl import QWEN_VIT, QWEN_WRAPPER

FAMILY = VisionFamily(
    name="glm4v",
    model_types=("glm4v",),
    # the text MLP's activation under its standard name, as GLM-4's (the tower's MLP has the standard names)
    rename={**QWEN_WRAPPER, **QWEN_VIT, "mlp.activation_fn": "mlp.act_fn"},
    # the tower's by module type, as on Qwen2-VL; the text model's sublayers by theirs, as GLM-4's
    envoys={
        Glm4vVisionModel: Glm4vVision,
        Glm4vVisionBlock: QwenVisionLayer,
        Glm4vVisionAttention: QwenVisionAttention,
        Glm4VisionMlp: QwenVisionMlp,
        Glm4vVisionPatchMerger: Glm4vMerger,
        Glm4vModel: ImageScatter,
        Glm4vTextAttention: Glm4Attention,
        Glm4vTextMLP: Glm4Mlp,
        **default.FAMILY.envoys,
    },
    tiny={"glm4v": TINY},
    skips={
        "glm4v": {
            "projector_reads_the_selected_stream": "GLM-4V's merger takes the output of the tower's downsampling convolution",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
