"""LLaVA-NeXT: LLaVA's CLIP tower, projector and Llama text model, with the image tiled (anyres) and unpadded.

The tree is LLaVA's (``model.vision``, ``model.projector``, the text model's
standard names); what differs is what the tower runs on and what the text
model receives. The processor cuts each image into a base crop (the whole
image resized to the tower's ``image_size``) and the tiles of its best
``image_grid_pinpoints`` resolution, so the tower's values are
``[crops, patches, vision_hidden_size]``, crop after crop, the base crop
first. ``LlavaNextModel`` projects every crop, lays the tiles' features out
on the image's grid, crops off the padding, adds the ``image_newline`` row at
the end of each grid row, and concatenates the base crop's features before
them; ``image_features`` is that packed tensor as ``masked_scatter`` receives
it, so ``layers[0].layer_input[image_token_mask] == image_features`` still
holds while ``projector.projector_output`` is per crop, before the packing.
"""

from nnterp.families import default

from transformers.models.llava_next.modeling_llava_next import LlavaNextModel

from ..components import ImageScatter, Projector
from ..family import VisionFamily
from ..tiny.llava_next import LlavaNextTinyConfig
from ..tiny.sizes import CLIP, TEXT
from . import llava

FAMILY = VisionFamily(
    name="llava_next",
    model_types=("llava_next",),
    rename=llava.FAMILY.rename,
    # LLaVA's, with LlavaNextModel as the scatter (the same ``inputs_embeds.masked_scatter``)
    envoys={**llava.CLIP_ENVOYS, "projector": Projector, LlavaNextModel: ImageScatter, **default.FAMILY.envoys},
    tiny={
        # anyres: a base crop and the 2x2 tiles of 64x64 for the checks' 40x48 image; 70 image tokens
        "llava_next": LlavaNextTinyConfig(
            "llava_next",
            {
                "text_config": TEXT,
                "vision_config": CLIP,
                "image_token_id": 300,
                "image_grid_pinpoints": [[32, 64], [64, 32], [64, 64]],
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
