"""A SigLIP tower as PaliGemma and Gemma 3 host it: the wrapper scatters its projection unflattened."""

from __future__ import annotations

from torch import Tensor

from ..layouts import ImageFeatures
from .vision import Vision


class SiglipVision(Vision):
    """A SigLIP tower (no class row; ``post_layernorm`` norms every patch, so ``tower_output`` is the normed last stream).

    PaliGemma and Gemma 3 hand ``masked_scatter`` the projector's output as
    it is, ``[images, image_tokens_per_image, hidden_size]``, where LLaVA
    hands it flattened; ``masked_scatter`` takes its source in order, so
    ``image_features`` is that argument viewed ``[image_tokens, hidden_size]``
    (in-place edits land), and a tensor of that shape written in its place is
    scattered the same way.
    """

    image_features = Vision.image_features.at()


def _flattened(envoy: object, value: Tensor) -> ImageFeatures:
    return value.flatten(0, -2)


SiglipVision.image_features._preprocess = _flattened
