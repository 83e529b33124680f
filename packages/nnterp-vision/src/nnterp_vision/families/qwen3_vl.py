"""Qwen3-VL: Qwen2-VL's layout with a Qwen3 text model and DeepStack, under Qwen3VLForConditionalGeneration.

A diff of Qwen2-VL: the tower (``model.vision``, a ``Qwen3Vision``) adds
learned position embeddings after the patch embedding and attends per image
(``PER_IMAGE``: scores and pattern Unavailable, the interior served whole);
its MLP's ``linear_fc1`` / ``linear_fc2`` are aliased ``up_proj`` /
``down_proj``. The main merger is ``model.projector``; ``Qwen3VLModel.forward``
scatters its output into the token embeddings (the ``ImageScatter``), so
``image_features`` is read there. DeepStack: blocks ``deepstack_layers`` feed
``model.vision.deepstack_merger_list[j]`` (each a ``Qwen3Merger``, values
served), whose output the text model adds to the stream at the image tokens
after text layer ``j`` (``DEEPSTACK``), between layers, not inside any.
"""

from nnterp.families import default

from transformers.models.qwen3_vl.modeling_qwen3_vl import (
    Qwen3VLModel,
    Qwen3VLVisionAttention,
    Qwen3VLVisionBlock,
    Qwen3VLVisionMLP,
    Qwen3VLVisionModel,
    Qwen3VLVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger, Qwen3Vision
from ..family import VisionFamily
from ..tiny.qwen3_vl import Qwen3VLTinyConfig
from ..tiny.sizes import QWEN3_TEXT, QWEN3_VL_VIT, QWEN_TOKENS
from .qwen2_vl import QWEN_VIT, QWEN_WRAPPER

FAMILY = VisionFamily(
    name="qwen3_vl",
    model_types=("qwen3_vl",),
    # the tower MLP's names (the mergers' linear_fc1 / linear_fc2 keep theirs)
    rename={**QWEN_WRAPPER, **QWEN_VIT, "mlp.linear_fc1": "mlp.up_proj", "mlp.linear_fc2": "mlp.down_proj"},
    # the tower's by module type, as on LLaVA: "layers.*" matches the tower's native path too
    envoys={
        Qwen3VLVisionModel: Qwen3Vision,
        Qwen3VLVisionBlock: QwenVisionLayer,
        Qwen3VLVisionAttention: QwenVisionAttention,
        Qwen3VLVisionMLP: QwenVisionMlp,
        Qwen3VLVisionPatchMerger: Qwen3Merger,
        Qwen3VLModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={
        # the checks' image: 4x6 patches, 6 image tokens; tower block 0's DeepStack merger is added after text layer 0
        "qwen3_vl": Qwen3VLTinyConfig(
            "qwen3_vl",
            {"text_config": QWEN3_TEXT, "vision_config": QWEN3_VL_VIT, **QWEN_TOKENS},
            load={"attn_implementation": "eager"},
        ),
    },
    skips={
        "qwen3_vl": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
