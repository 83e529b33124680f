"""LLaVA on a Pixtral tower (Pixtral 12B): ``model_type`` llava whose ``vision_config`` is pixtral.

Served through ``llava.for_config``: the same wrapper as LLaVA
(``LlavaForConditionalGeneration``, its two-layer projector, ``LlavaModel``
as the ``ImageScatter``), with Mistral 3's tower. The tower is
``model.vision``, a ``PixtralVision`` (packed: every image's patches in one
row ``[1, all patches, vision_hidden_size]`` under a block-diagonal mask), its
blocks ``model.vision.layers[i]`` with Pixtral's names aliased to the standard
ones. No patch merger: the projector (``model.projector``) maps each patch to
one image token, on the packed row, and ``LlavaModel`` splits its rows per
image before the scatter. The processor is Pixtral's: ``[IMG]`` tokens, each
row of the image closed by ``[IMG_BREAK]`` (the last by ``[IMG_END]``);
``image_token_mask`` is the ``[IMG]`` tokens alone.
"""

from nnterp.families import default

from transformers.models.llava.modeling_llava import LlavaModel

from ..components import ImageScatter
from ..components.pixtral import PackedProjector
from ..family import VisionFamily
from ..tiny.mistral3 import PixtralTinyConfig
from ..tiny.sizes import PIXTRAL, TEXT
from . import llava
from .mistral3 import PIXTRAL_ENVOYS, PIXTRAL_TOWER

FAMILY = VisionFamily(
    name="llava_pixtral",
    rename={**llava.WRAPPER, **PIXTRAL_TOWER},
    envoys={
        **PIXTRAL_ENVOYS,
        "projector": PackedProjector,
        LlavaModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={
        # LLaVA on a Pixtral tower (Pixtral 12B): [IMG] is id 300; 10x12 patches, one image token each (no merge)
        "llava_pixtral": PixtralTinyConfig(
            "llava",
            {
                "text_config": {**TEXT, "model_type": "mistral"},
                "vision_config": PIXTRAL,
                "image_token_id": 300,
                "vision_feature_layer": -1,
                "vision_feature_select_strategy": "full",
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
