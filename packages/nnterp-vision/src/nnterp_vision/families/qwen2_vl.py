"""Qwen2-VL: the Qwen ViT with its merger inside, and a Qwen2 text model on multimodal rotary positions, under Qwen2VLForConditionalGeneration.

A diff of LLaVA: the tower is ``model.vision`` (native ``model.model.visual``),
a ``QwenVision`` (packed: every image's patches in one row, ``[1, patches,
vision_hidden_size]``, in merge-block order, ``image_grid_thw`` splitting
it), its blocks ``model.vision.layers[i]`` with the ViT's names (``norm1``,
``attn``, ``qkv``, ``proj``, ``fc1`` ...) aliased to the standard ones. The
projector is the tower's own merger, ``model.projector`` (native
``model.model.visual.merger``). Its attention splits per image before the
interface, so ``attention_scores`` and ``attention_probabilities`` are
Unavailable (``PER_IMAGE``) and the queries, keys, values and head outputs are
served whole (``QwenVisionAttention``). ``Qwen2VLModel.forward`` runs the tower
and scatters the merged features into the token embeddings, so it is the
``ImageScatter``. The text model is Qwen2's, with the 3D (temporal, height,
width) rotary positions the wrapper computes from ``mm_token_type_ids`` and
``image_grid_thw``: the processor supplies both, so trace through it
(``model.trace(prompt, images=[image])``, the prompt holding
``<|image_pad|>``). The processor needs torchvision (its video processor).
"""

from nnterp.families import default

from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    PatchMerger,
    Qwen2VisionTransformerPretrainedModel,
    Qwen2VLModel,
    Qwen2VLVisionBlock,
)
from transformers.models.qwen2_vl.modeling_qwen2_vl import VisionAttention as QwenAttention
from transformers.models.qwen2_vl.modeling_qwen2_vl import VisionMlp as QwenMlp

from ..components import ImageScatter
from ..components.qwen import QwenMerger, QwenVision, QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..family import VisionFamily
from ..tiny.qwen2_vl import QwenVLTinyConfig
from ..tiny.sizes import QWEN2_VL_VIT, QWEN_TEXT, QWEN_TOKENS

#: the Qwen ViT's names, under the standard ones (shared with Qwen2.5-VL, whose gated MLP has the standard names)
QWEN_VIT = {
    "blocks": "layers",
    "norm1": "input_layernorm",
    "norm2": "post_attention_layernorm",
    "attn": "self_attn",
    "attn.proj": "attn.o_proj",
}
#: Qwen2-VL's tower MLP names
QWEN2_VL_MLP = {
    "fc1": "up_proj",
    "fc2": "down_proj",
    "act": "act_fn",
}

#: the wrapper's names: the text model's at the root, the tower as vision, its merger as projector (shared with Qwen2.5-VL)
QWEN_WRAPPER = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.visual": "vision",
    "model.visual.merger": "projector",
}

FAMILY = VisionFamily(
    name="qwen2_vl",
    model_types=("qwen2_vl",),
    rename={**QWEN_WRAPPER, **QWEN_VIT, **QWEN2_VL_MLP},
    # the tower's by module type, as on LLaVA: "layers.*" matches the tower's native path too
    envoys={
        Qwen2VisionTransformerPretrainedModel: QwenVision,
        Qwen2VLVisionBlock: QwenVisionLayer,
        QwenAttention: QwenVisionAttention,
        QwenMlp: QwenVisionMlp,
        PatchMerger: QwenMerger,
        Qwen2VLModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # the checks' image: 4x6 patches, 6 image tokens
    tiny={
        "qwen2_vl": QwenVLTinyConfig(
            "qwen2_vl", {"text_config": QWEN_TEXT, "vision_config": QWEN2_VL_VIT, **QWEN_TOKENS}
        )
    },
    skips={
        "qwen2_vl": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
