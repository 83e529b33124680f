"""LLaVA-OneVision: LLaVA-NeXT's anyres packing on a SigLIP tower and a Qwen2 text model, under LlavaOnevisionForConditionalGeneration.

A diff of LLaVA-NeXT: the same paths and the same packing (a base crop, the
tiles of the best ``image_grid_pinpoints`` resolution laid out on the
image's grid, unpadded, an ``image_newline`` row closing each grid row,
interpolated down where an image has more than ``vision_aspect_ratio``'s
``anyres_max_<n>`` crops' worth), so ``projector.projector_output`` is per
crop and ``image_features`` the packed rows as ``masked_scatter`` receives
them. What differs: the tower is SigLIP (no class row; the projector takes
``vision_feature_layer``'s stream, the last block's ``layer_output`` before
``post_layernorm``); a prompt holding several images has no tiles, each
image its base crop and one ``image_newline`` row; and
``LlavaOnevisionModel.forward`` scatters images, then videos, so the image
scatter is its first ``inputs_embeds.masked_scatter``. The text model is
Qwen2's, served by the default family. Videos are not served.
"""

from nnterp.families import default

from transformers.models.llava_onevision.modeling_llava_onevision import LlavaOnevisionModel
from transformers.models.siglip.modeling_siglip import SiglipVisionModel

from ..components import ImageScatter, Projector, Vision
from ..family import VisionFamily
from ..tiny.llava_onevision import TINY
from . import llava_next
from .paligemma import SIGLIP_BLOCKS

FAMILY = VisionFamily(
    name="llava_onevision",
    model_types=("llava_onevision",),
    # the same paths as LLaVA-NeXT's: SigLIP's names are CLIP's
    rename=llava_next.FAMILY.rename,
    # LLaVA-NeXT's, on SigLIP's module types; the wrapper hands the packed rows flat, so the plain tower's image_features
    envoys={
        SiglipVisionModel: Vision,
        **SIGLIP_BLOCKS,
        "projector": Projector,
        LlavaOnevisionModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # the checks' image is a base crop and 2 x 2 tiles of 32 x 32, 70 image tokens; two in a prompt, 17 each
    tiny={"llava_onevision": TINY},
)
