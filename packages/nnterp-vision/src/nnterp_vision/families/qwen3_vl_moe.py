"""Qwen3-VL-MoE: Qwen3-VL's tower and DeepStack on a Qwen3-MoE text model, under Qwen3VLMoeForConditionalGeneration.

A diff of Qwen3-VL: the tower, its mergers and the scatter are Qwen3-VL's
under the MoE module's own class names (``Qwen3Vision``, ``PER_IMAGE``,
``DEEPSTACK``). The text model's sparse blocks are Qwen3-MoE's mixture (a
softmax ``gate``, aliased ``router``, over fused ``experts``), except that
its router renormalizes the top-k weights always (the text config has no
``norm_topk_prob``): that is Mixtral's mixture (``nnterp_text.families.mixtral``),
keyed on every text block's MLP by path, as there, so a dense block (``mlp_only_layers``) says it is dense.
"""

from nnterp.families import default
from nnterp_text.families.mixtral import MixtralMoe
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
from .qwen3_vl import RENAME as QWEN3_VL_RENAME
from .qwen3_vl import TASK

__all__ = ["ENVOYS", "RENAME", "TASK"]

#: Qwen3-VL's names, and the text mixture's router under its standard name (the tower's MLPs have no gate)
RENAME = {**QWEN3_VL_RENAME, "mlp.gate": "mlp.router"}

#: the tower's by module type, as on Qwen3-VL (type keys win over paths, so its MLPs are untouched); every text MLP a mixture
ENVOYS = {
    Qwen3VLMoeVisionModel: Qwen3Vision,
    Qwen3VLMoeVisionBlock: QwenVisionLayer,
    Qwen3VLMoeVisionAttention: QwenVisionAttention,
    Qwen3VLMoeVisionMLP: QwenVisionMlp,
    Qwen3VLMoeVisionPatchMerger: Qwen3Merger,
    Qwen3VLMoeModel: ImageScatter,
    **default.ENVOYS,
    "layers.*.mlp": MixtralMoe,
}
