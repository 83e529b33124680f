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
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipEncoderLayer, SiglipMLP, SiglipVisionModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp
from .llava_next import RENAME, TASK  # noqa: F401 - the same paths: SigLIP's names are CLIP's

#: LLaVA-NeXT's, on SigLIP's module types; the wrapper hands the packed rows flat, so the plain tower's image_features
ENVOYS = {
    SiglipVisionModel: Vision,
    SiglipEncoderLayer: VisionLayer,
    SiglipAttention: VisionAttention,
    SiglipMLP: VisionMlp,
    "projector": Projector,
    LlavaOnevisionModel: ImageScatter,
    **default.ENVOYS,
}
