"""Kimi-K2.5: a packed MoonViT tower, an MLP projector outside it and a DeepSeek-V3 text model, under Kimi_K25ForConditionalGeneration.

A diff of Qwen2-VL: the tower (``model.vision``, native
``model.vision_tower``, a ``MoonVit``) runs every image's patches in one
row and attends per image (``PER_IMAGE``), with the Qwen ViT's block names
(``norm1`` / ``attn`` / ``norm2`` / ``mlp``, ``fc1`` / ``fc2``), but its
blocks are already ``layers``, its attention projects q, k and v apart
(``MoonVitAttention``), it ends in a norm (``tower_output``) and then
mean-pools each merge kernel over frames. The projector
(``model.projector``, native ``mm_projector``) is outside the tower.
``Kimi_K25Model.forward`` zeroes the image tokens' ids, embeds, and
scatters the projection (``inputs_embeds.masked_scatter``: the
``ImageScatter``). The text model is DeepSeek-V3's, served as
nnterp-text's DeepSeek-V3 family (``deepseek_v3``) serves it.
"""

from transformers.models.kimi_k25.modeling_kimi_k25 import (
    Kimi_K25Model,
    Kimi_K25MultimodalProjection,
    Kimi_K25VisionAttention,
    Kimi_K25VisionEncoderLayer,
    Kimi_K25VisionMLP,
    Kimi_K25VisionModel,
)

from ..components import ImageScatter
from ..components.kimi_k25 import MoonVit, MoonVitAttention, MoonVitProjector
from ..components.qwen import QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.kimi_k25 import TINY
from .qwen2_vl import QWEN2_VL_MLP, QWEN_VIT, QWEN_WRAPPER

FAMILY = VisionFamily(
    name="kimi_k25",
    model_types=("kimi_k25",),
    rename={
        **{native: standard for native, standard in QWEN_WRAPPER.items() if not native.startswith("model.visual")},
        **{native: standard for native, standard in QWEN_VIT.items() if native != "blocks"},
        **QWEN2_VL_MLP,
        "model.vision_tower": "vision",
        "model.mm_projector": "projector",
    },
    envoys={
        Kimi_K25VisionModel: MoonVit,
        Kimi_K25VisionEncoderLayer: QwenVisionLayer,
        Kimi_K25VisionAttention: MoonVitAttention,
        Kimi_K25VisionMLP: QwenVisionMlp,
        Kimi_K25MultimodalProjection: MoonVitProjector,
        Kimi_K25Model: ImageScatter,
    },
    # the text model's blocks by path, every MLP a SigmoidMoe (dense ones say so), the router aliased: DeepSeek-V3's family;
    # the tower's, keyed by type, come first
    text_family="deepseek_v3",
    tiny={"kimi_k25": TINY},
    skips={
        "kimi_k25": {
            "projector_reads_the_selected_stream": "MoonViT gathers its final norm's output by merge kernel",
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
