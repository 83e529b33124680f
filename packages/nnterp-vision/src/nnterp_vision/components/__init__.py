"""The vision components a family keys on a wrapper's modules."""

from .blocks import VisionAttention, VisionLayer, VisionMlp
from .projector import Projector
from .scatter import ImageScatter
from .availability import no_images
from .vision import Vision, image_token_id

__all__ = ["ImageScatter", "Projector", "Vision", "VisionAttention", "VisionLayer", "VisionMlp", "image_token_id", "no_images"]
