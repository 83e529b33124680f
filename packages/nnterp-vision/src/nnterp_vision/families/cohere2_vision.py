"""Command A Vision: Aya Vision's SigLIP tower, pixel-shuffle projector and Cohere2 text model, under Cohere2VisionForConditionalGeneration.

A diff of Aya Vision: the same tree (``model.vision``, ``model.projector``,
the text model's standard names) and the same tiling (tiles of the tower's
``image_size`` and a thumbnail, crop after crop on the tower's ``images``
axis). What differs: the projector takes the tower's ``last_hidden_state``
(``tower_output``, after SigLIP's ``post_layernorm``) and has no layer
norm: the pixel shuffle, then the SwiGLU of two linears.
``Cohere2VisionModel.forward`` is the ``ImageScatter``. Unlike Aya Vision's,
the wrapper does not multiply the logits by Cohere2's ``logit_scale``: the
plain projection.

The prompt's placeholder is ``<|IMG_PATCH|>`` itself
(``processor.image_token``); the processor writes ``<|START_OF_IMG|>``, then
per crop its ``<|IMG_PATCH|>`` tokens and an ``<|IMG_LINE_BREAK|>``, then
``<|END_OF_IMG|>``; ``image_token_mask`` is the ``<|IMG_PATCH|>`` tokens alone.
"""

from nnterp.logits import unembed

from transformers.models.aya_vision.modeling_aya_vision import AyaVisionModel, AyaVisionMultiModalProjector
from transformers.models.cohere2_vision.modeling_cohere2_vision import (
    Cohere2VisionModel,
    Cohere2VisionMultiModalProjector,
)

from ..components import ImageScatter
from ..components.pixel_shuffle import PixelShuffleProjector
from ..tiny.cohere2_vision import TINY
from . import aya_vision

#: Aya Vision's paths, tower and text family, with Command A Vision's projector and scatter, and unscaled logits
FAMILY = aya_vision.FAMILY.replace(
    name="cohere2_vision",
    model_types=("cohere2_vision",),
    # the wrapper's lm_head output is the logits: neither Aya's scale nor the Cohere text family's
    project_on_vocab=unembed,
    envoys={
        Cohere2VisionMultiModalProjector: PixelShuffleProjector,
        Cohere2VisionModel: ImageScatter,
        **{
            key: value
            for key, value in aya_vision.FAMILY.envoys.items()
            if key not in (AyaVisionMultiModalProjector, AyaVisionModel)
        },
    },
    tiny={"cohere2_vision": TINY},
    skips={
        "cohere2_vision": {
            "mid_stream": "a parallel block",
        },
    },
)
