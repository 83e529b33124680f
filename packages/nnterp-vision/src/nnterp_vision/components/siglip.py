"""A SigLIP tower as PaliGemma and Gemma 3 host it: the wrapper scatters its projection unflattened."""

from __future__ import annotations

from .vision import Vision


class SiglipVision(Vision):
    """A SigLIP tower (no class row; ``post_layernorm`` norms every patch, so ``tower_output`` is the normed last stream).

    PaliGemma and Gemma 3 hand ``masked_scatter`` the projector's output as
    it is, ``[images, image_tokens_per_image, hidden_size]``, where LLaVA
    hands it flattened; ``image_features`` serves it flattened, as ``Vision``
    does every scatter's argument.
    """
