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
(nnterp-text's Cohere family, by the ``cohere2`` model type), and the wrapper
multiplies its ``lm_head``'s logits by the text config's ``logit_scale``, as
Cohere2's own causal LM does (``project_on_vocab``).

The prompt's placeholder is ``<image>`` (``processor.image_token``); the
processor writes ``<|START_OF_IMG|>``, ``TILE_<i>`` and each tile's
``<|IMG_PATCH|>`` tokens, ``TILE_GLOBAL`` and the thumbnail's, then
``<|END_OF_IMG|>``; ``image_token_mask`` is the ``<|IMG_PATCH|>`` tokens alone.
"""

from typing import Any

from nnterp.logits import unembed

import torch
from transformers.models.aya_vision.modeling_aya_vision import AyaVisionModel, AyaVisionMultiModalProjector
from transformers.models.siglip.modeling_siglip import SiglipVisionModel

from ..components import ImageScatter
from ..components.pixel_shuffle import PixelShuffleProjector
from ..components.siglip import SiglipVision
from ..family import VisionFamily
from ..tiny.aya_vision import TINY
from . import llava
from .paligemma import SIGLIP_BLOCKS


def times_text_logit_scale(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """``lm_head(norm(hidden))`` times the text config's ``logit_scale``: what the wrapper's forward does to the last layer's output."""
    return unembed(model, hidden) * model.text_config.logit_scale


FAMILY = VisionFamily(
    name="aya_vision",
    model_types=("aya_vision",),
    # the same paths as LLaVA's: SigLIP's names are CLIP's
    rename=llava.FAMILY.rename,
    # PaliGemma's SigLIP tower, Aya's projector and scatter; Cohere2's text blocks (parallel, keyed by path) come with its family
    envoys={
        SiglipVisionModel: SiglipVision,
        **SIGLIP_BLOCKS,
        AyaVisionMultiModalProjector: PixelShuffleProjector,
        AyaVisionModel: ImageScatter,
    },
    text_family="cohere2",
    # the wrapper multiplies lm_head's logits by text_config.logit_scale (the root has no logit_scale attribute,
    # which the Cohere text family's projection reads)
    project_on_vocab=times_text_logit_scale,
    tiny={"aya_vision": TINY},
    skips={
        "aya_vision": {
            "mid_stream": "a parallel block",
        },
    },
)
