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
from ..tiny.lighton_ocr import LightOnOcrTinyConfig
from ..tiny.sizes import PIXTRAL, TEXT
from . import mistral3
from .mistral3 import PIXTRAL_ENVOYS, PIXTRAL_TOWER

FAMILY = mistral3.FAMILY.replace(
    name="lighton_ocr",
    model_types=("lighton_ocr",),
    rename={
        "model.language_model.layers": "layers",
        "model.language_model.embed_tokens": "embed_tokens",
        "model.language_model.norm": "norm",
        "model.vision_encoder": "vision",
        "model.vision_projection": "projector",
        **PIXTRAL_TOWER,
    },
    envoys={
        **PIXTRAL_ENVOYS,
        LightOnOcrMultiModalProjector: PatchMergerProjector,
        LightOnOcrModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={
        # Mistral 3's tower and merger on a Qwen3 text model; the checks' image is 10 x 12 patches, 30 image tokens
        "lighton_ocr": LightOnOcrTinyConfig(
            "lighton_ocr",
            {
                "text_config": {**TEXT, "model_type": "qwen3"},
                "vision_config": PIXTRAL,
                "image_token_id": 300,
                "spatial_merge_size": 2,
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
