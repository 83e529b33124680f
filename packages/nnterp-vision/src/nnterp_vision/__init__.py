"""nnterp_vision: a vision-language wrapper's tower as ``model.vision``, and where its image meets the text model.

The components (``Vision``, ``VisionLayer``, ``VisionAttention``, ``VisionMlp``,
``Projector``, ``ImageScatter``) are what a family keys on a wrapper's modules;
the families are found through the ``nnterp.families`` entry points.
"""

from .components import (
    ImageScatter,
    Projector,
    Vision,
    VisionAttention,
    VisionLayer,
    VisionMlp,
    image_token_id,
    no_images,
)
from .family import VisionFamily, forget_rope_deltas
from .layouts import ImageFeatures, ImageTokenMask, Patches

__all__ = [
    "ImageFeatures",
    "ImageScatter",
    "ImageTokenMask",
    "Patches",
    "Projector",
    "Vision",
    "VisionAttention",
    "VisionFamily",
    "VisionLayer",
    "VisionMlp",
    "forget_rope_deltas",
    "image_token_id",
    "no_images",
]
