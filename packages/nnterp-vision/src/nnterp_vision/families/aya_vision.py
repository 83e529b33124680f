"""Aya Vision: a SigLIP tower, a pixel-shuffle SwiGLU projector and a Cohere2 text model, under AyaVisionForConditionalGeneration.

A diff of PaliGemma: the same SigLIP tower under CLIP's names (``model.vision``),
LLaVA's paths, and ``AyaVisionModel.forward`` as the ``ImageScatter``
(``inputs_embeds.masked_scatter``). What differs: the processor cuts each
image into tiles of the tower's ``image_size`` plus a global thumbnail (a
lone tile has none), so the tower's ``images`` axis runs over crops, image
after image, each image's tiles first; the projector
(``PixelShuffleProjector``) takes ``vision_feature_layer``'s stream (the
last block's ``layer_output``, before SigLIP's ``post_layernorm``, so not
``tower_output``), folds each ``downsample_factor`` square of patches into
one row, layer-norms and projects it; the wrapper flattens that into
``image_features``. The text model is Cohere2's parallel block
(``nnterp_text.families.cohere``), but the wrapper's ``lm_head`` does not
multiply by ``logit_scale``, so the logits are the plain projection.

The prompt's placeholder is ``<image>`` (``processor.image_token``); the
processor writes ``<|START_OF_IMG|>``, ``TILE_<i>`` and each tile's
``<|IMG_PATCH|>`` tokens, ``TILE_GLOBAL`` and the thumbnail's, then
``<|END_OF_IMG|>``; ``image_token_mask`` is the ``<|IMG_PATCH|>`` tokens alone.
"""

from nnterp_text.families.cohere import ENVOYS as COHERE
from transformers.models.aya_vision.modeling_aya_vision import AyaVisionModel, AyaVisionMultiModalProjector
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipEncoderLayer, SiglipMLP, SiglipVisionModel

from ..components import ImageScatter, VisionAttention, VisionLayer, VisionMlp
from ..components.pixel_shuffle import PixelShuffleProjector
from ..components.siglip import SiglipVision
from .llava import RENAME, TASK  # noqa: F401 - the same paths: SigLIP's names are CLIP's

#: PaliGemma's SigLIP tower, Aya's projector and scatter, Cohere2's text blocks (parallel, keyed by path)
ENVOYS = {
    SiglipVisionModel: SiglipVision,
    SiglipEncoderLayer: VisionLayer,
    SiglipAttention: VisionAttention,
    SiglipMLP: VisionMlp,
    AyaVisionMultiModalProjector: PixelShuffleProjector,
    AyaVisionModel: ImageScatter,
    **COHERE,
}
