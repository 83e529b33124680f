"""LightOnOCR: a Pixtral tower, Mistral 3's patch-merging projector and a Qwen3 text model, under LightOnOcrForConditionalGeneration.

A diff of Mistral 3: the same packed Pixtral tower (``PixtralVision``,
``[1, all patches, vision_hidden_size]`` under a block-diagonal mask) and
the same projector (a norm, the patch merger folding each
``spatial_merge_size`` square of patches into one row, two linears), under
other paths: the tower is ``model.vision_encoder``, the projector
``model.vision_projection``. ``LightOnOcrModel.forward`` runs the tower and
scatters the projected features (``inputs_embeds.masked_scatter``), so it is
the ``ImageScatter``; the text model is Qwen3's, served by the default family.
The processor writes one ``<|image_pad|>`` per image token and no break
tokens, so ``image_token_mask`` is every token the image takes.
"""

from nnterp.families import default
from transformers.models.lighton_ocr.modeling_lighton_ocr import LightOnOcrModel, LightOnOcrMultiModalProjector

from ..components import ImageScatter
from ..components.pixtral import PatchMergerProjector
from .mistral3 import PIXTRAL_ENVOYS, PIXTRAL_RENAME, TASK  # noqa: F401 - the task to load with

RENAME = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.vision_encoder": "vision",
    "model.vision_projection": "projector",
    **PIXTRAL_RENAME,
}

ENVOYS = {
    **PIXTRAL_ENVOYS,
    LightOnOcrMultiModalProjector: PatchMergerProjector,
    LightOnOcrModel: ImageScatter,
    **default.ENVOYS,
}
