"""Llama 4's tower and projector: an unfold-and-linear patch embedding, the class row last, the pixel shuffle inside the tower."""

from __future__ import annotations

from nnterp.descriptors import EProperty

from torch import Tensor

from ..layouts import Patches
from .availability import no_images
from .vision import Vision


class Llama4Vision(Vision):
    """Llama 4's tower (``Llama4VisionModel``): an unfold-and-linear patch embedding, a class row appended last, its adapter inside.

    ``patch_embeddings`` is the patch embedding's output as it is,
    ``[images, patches, vision_hidden_size]`` (an ``nn.Unfold`` and a linear,
    no grid to flatten), before the class row, the position embedding and
    ``layernorm_pre``. ``tower_output`` is ``layernorm_post``'s output,
    ``[images, patches + 1, vision_hidden_size]``, the class row last: the
    tower's ``last_hidden_state`` is not, since the tower drops the class row
    and runs its ``vision_adapter`` (pixel shuffle and a two-layer MLP) before
    returning. ``image_features`` is read in the root's own forward (the
    family's ``root_scatter``).
    """

    @EProperty("patch_embed.output", "The patch embedding's output, one row per patch", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """The patch embeddings, ``[images, patches, vision_hidden_size]``, in raster order. Assign a tensor of the same shape to replace it."""
        return value

    @EProperty(
        "layernorm_post.output", "The last block's stream after the tower's final norm, the class row last", no_images
    )
    def tower_output(self, value: Tensor) -> Patches:
        """The last block's stream after ``layernorm_post``, ``[images, patches + 1, vision_hidden_size]``. Assign to replace it."""
        return value

    @property
    def pixel_shuffle_ratio(self) -> float:
        """How much the adapter's pixel shuffle scales each side of the patch grid (0.5: four patches to one token)."""
        return float(self._config.pixel_shuffle_ratio)
