"""Aria: Idefics3's tower, a projector pooling the patches into learned queries, and Aria's MoE text model, under AriaForConditionalGeneration.

A diff of Idefics3 (the tower, SigLIP's modules under CLIP's names) laid out
as LLaVA (``model.vision_tower`` as ``model.vision``,
``model.multi_modal_projector`` as ``model.projector``,
``AriaModel.forward`` scattering the projection, the ``ImageScatter``). The
projector reads the tower's ``hidden_states[vision_feature_layer]`` (the
last block's stream by default, before the tower's ``post_layernorm``) and
cross-attends a fixed number of learned queries over the patches (how many:
``projector_patch_to_query_dict``, by patch count), so an image is that many
image tokens whatever its patches. The text blocks are nnterp-text's Aria
family's (OLMoE's mixture under its own router).
"""

from transformers.models.aria.modeling_aria import AriaModel, AriaProjector
from transformers.models.idefics3.modeling_idefics3 import (
    Idefics3EncoderLayer,
    Idefics3VisionAttention,
    Idefics3VisionMLP,
    Idefics3VisionTransformer,
)

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp
from ..family import VisionFamily
from ..tiny.aria import TINY
from . import llava

FAMILY = VisionFamily(
    name="aria",
    model_types=("aria",),
    # LLaVA's paths; the tower's modules are Idefics3's, SigLIP's under CLIP's names
    rename=llava.FAMILY.rename,
    envoys={
        Idefics3VisionTransformer: Vision,
        Idefics3EncoderLayer: VisionLayer,
        Idefics3VisionAttention: VisionAttention,
        Idefics3VisionMLP: VisionMlp,
        AriaProjector: Projector,
        AriaModel: ImageScatter,
    },
    text_family="aria_text",
    # every image resized to 980 pixels: 14 x 14 patches of 70, pooled into 4 learned queries; Aria's MoE text model
    tiny={"aria": TINY},
    skips={
        "aria": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
