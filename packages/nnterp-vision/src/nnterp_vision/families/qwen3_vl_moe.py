"""Qwen3-VL-MoE: Qwen3-VL's tower and DeepStack on a Qwen3-MoE text model, under Qwen3VLMoeForConditionalGeneration.

A diff of Qwen3-VL: the tower, its mergers and the scatter are Qwen3-VL's
under the MoE module's own class names (``Qwen3Vision``, ``PER_IMAGE``,
``DEEPSTACK``). The text model's sparse blocks are Qwen3-MoE's mixture (a
softmax ``gate``, aliased ``router``, over fused ``experts``), except that
its router renormalizes the top-k weights always (the text config has no
``norm_topk_prob``): that is Mixtral's mixture (``MixtralMoe``),
keyed on every text block's MLP by path, as there, so a dense block (``mlp_only_layers``) says it is dense.
"""

from nnterp import MixtralMoe
from nnterp.families import default

from transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe import (
    Qwen3VLMoeModel,
    Qwen3VLMoeVisionAttention,
    Qwen3VLMoeVisionBlock,
    Qwen3VLMoeVisionMLP,
    Qwen3VLMoeVisionModel,
    Qwen3VLMoeVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger, Qwen3Vision
from ..tiny.qwen3_vl import Qwen3VLTinyConfig
from ..tiny.sizes import QWEN3_TEXT, QWEN3_VL_VIT, QWEN_TOKENS
from . import qwen3_vl

FAMILY = qwen3_vl.FAMILY.replace(
    name="qwen3_vl_moe",
    model_types=("qwen3_vl_moe",),
    # Qwen3-VL's names, and the text mixture's router under its standard name (the tower's MLPs have no gate)
    rename={**qwen3_vl.FAMILY.rename, "mlp.gate": "mlp.router"},
    # the tower's by module type, as on Qwen3-VL (type keys win over paths, so its MLPs are untouched); every text MLP a mixture
    envoys={
        Qwen3VLMoeVisionModel: Qwen3Vision,
        Qwen3VLMoeVisionBlock: QwenVisionLayer,
        Qwen3VLMoeVisionAttention: QwenVisionAttention,
        Qwen3VLMoeVisionMLP: QwenVisionMlp,
        Qwen3VLMoeVisionPatchMerger: Qwen3Merger,
        Qwen3VLMoeModel: ImageScatter,
        **default.FAMILY.envoys,
        "layers.*.mlp": MixtralMoe,
    },
    tiny={
        # Qwen3-VL's tower on a Qwen3-MoE text model (4 experts, top 2; num_experts is an alias, so not shrunk): 6 image tokens
        "qwen3_vl_moe": Qwen3VLTinyConfig(
            "qwen3_vl_moe",
            {"text_config": {**QWEN3_TEXT, "num_experts": 4}, "vision_config": QWEN3_VL_VIT, **QWEN_TOKENS},
            load={"attn_implementation": "eager"},
        ),
    },
    skips={
        "qwen3_vl_moe": {
            "neurons_make_contribution": "a mixture of experts",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
