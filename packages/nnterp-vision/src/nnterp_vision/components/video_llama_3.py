"""VideoLLaMA3's tower: PaddleOCR-VL's packed SigLIP-named ViT, then a per-image bilinear downsample before its projector."""

from __future__ import annotations

from nnterp.errors import Unavailable

from .glm4v import Glm4vMerger
from .paddleocr_vl import PaddleOcrVision
from .projector import Projector
from .qwen import packed
from .vision import Vision

#: why VideoLLaMA3's tower has no one merge size
PER_IMAGE_MERGE = (
    "VideoLLaMA3 merges each image by its own factor, the processor's image_merge_sizes (1 for images, 2 for video "
    "frames by default), so the tower config has no spatial_merge_size"
)


class VideoLlama3Vision(PaddleOcrVision):
    """VideoLLaMA3's tower, at ``model.vision`` (native ``model.model.vision_model``): packed, per-image attention, a final norm.

    As PaddleOCR-VL's tower (SigLIP names, every image's patches in one row,
    ``PER_IMAGE``), its modules directly under it. ``tower_output`` is its final
    norm (``post_layernorm``) over every patch, ``[1, patches,
    vision_hidden_size]``; the tower then resamples each image's grid down by
    its merge size (bilinear, ``pixel_unshuffle``; the identity at an
    image's default merge size of 1), so its own ``last_hidden_state`` is one
    row per image token, which the projector (``model.projector``) takes.
    """

    tower_output = packed(Vision.tower_output.at("post_layernorm.output", select=None))

    @property
    def spatial_merge_size(self) -> int:
        """Unavailable: each image has its own merge size (``PER_IMAGE_MERGE``)."""
        raise Unavailable(self, "spatial_merge_size", PER_IMAGE_MERGE)


class VideoLlama3Projector(Glm4vMerger):
    """VideoLLaMA3's projector (``model.projector``): two linears around a GELU, row by row, from the tower's width to the text's.

    It takes the tower's ``last_hidden_state``, one row per image token
    (``tower_output`` resampled by each image's merge size), ``[image_tokens,
    vision_hidden_size]``, and returns ``[image_tokens, hidden_size]``: what
    the wrapper scatters, so ``projector_output == vision.image_features``.
    """

    projector_input_size = Projector.projector_input_size
    #: the tower's last_hidden_state (tower_output at an image's merge size of 1), as its config names no layer:
    #: ``Projector``'s selection, not GLM-4V's downsampled input
    no_selection = None
