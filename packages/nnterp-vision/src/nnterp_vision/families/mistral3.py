"""Mistral 3: a Pixtral tower, a patch-merging projector and a Mistral text model, under Mistral3ForConditionalGeneration.

A diff of LLaVA: the tower is ``model.vision``, a ``PixtralVision`` (packed:
every image's patches in one row ``[1, all patches, vision_hidden_size]``
under a block-diagonal mask), its blocks ``model.vision.layers[i]`` with
Pixtral's names (``attention_norm``, ``attention``, ``ffn_norm``,
``feed_forward`` ...) aliased to the standard ones; the projector
(``model.projector``) merges each ``spatial_merge_size`` square of patches
into one image token. ``Mistral3Model.forward`` runs the tower and scatters
the projected features into the token embeddings, so it is the
``ImageScatter``. The processor marks each image row with ``[IMG]`` tokens
and an ``[IMG_BREAK]`` (the last an ``[IMG_END]``); ``image_token_mask`` is
the ``[IMG]`` tokens alone, the ones that receive features.
"""

from nnterp.families import default

from transformers.models.mistral3.modeling_mistral3 import Mistral3Model, Mistral3MultiModalProjector
from transformers.models.pixtral.modeling_pixtral import (
    PixtralAttention,
    PixtralAttentionLayer,
    PixtralMLP,
    PixtralVisionModel,
)

from ..components import ImageScatter, VisionAttention, VisionLayer, VisionMlp
from ..components.pixtral import PatchMergerProjector, PixtralVision
from ..family import VisionFamily
from ..tiny.mistral3 import PixtralTinyConfig
from ..tiny.sizes import PIXTRAL, TEXT
from . import llava

#: Pixtral's tower names, under the standard ones (shared with LLaVA on a Pixtral tower and LightOnOCR)
PIXTRAL_TOWER = {
    "transformer.layers": "layers",
    "patch_conv": "patch_embed",
    "attention_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attention": "self_attn",
    "feed_forward": "mlp",
}

#: the tower's by module type, as on LLaVA: "layers.*" matches the tower's native path too
PIXTRAL_ENVOYS = {
    PixtralVisionModel: PixtralVision,
    PixtralAttentionLayer: VisionLayer,
    PixtralAttention: VisionAttention,
    PixtralMLP: VisionMlp,
}

FAMILY = VisionFamily(
    name="mistral3",
    model_types=("mistral3",),
    rename={**llava.WRAPPER, **PIXTRAL_TOWER},
    envoys={
        **PIXTRAL_ENVOYS,
        Mistral3MultiModalProjector: PatchMergerProjector,
        Mistral3Model: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={
        # [IMG] is id 300; 10x12 patches merged 2x2 into 30 image tokens
        "mistral3": PixtralTinyConfig(
            "mistral3",
            {
                "text_config": {**TEXT, "model_type": "mistral"},
                "vision_config": PIXTRAL,
                "image_token_id": 300,
                "spatial_merge_size": 2,
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
