"""The vision components a family keys on a wrapper's modules."""

from .availability import no_images
from .blocks import VisionAttention, VisionLayer, VisionMlp
from .projector import Projector
from .scatter import ImageScatter
from .vision import Vision, image_token_id

__all__ = [
    "ImageScatter",
    "Projector",
    "Vision",
    "VisionAttention",
    "VisionLayer",
    "VisionMlp",
    "image_token_id",
    "no_images",
]
