"""Why a model type of transformers' image-text-to-text mapping has no nnterp-vision family: what the report says of it.

The reasons are written once, in core (``nnterp.reach_vision``), where a load
refuses such a type with its reason; the report's vision section reads
``VISION_KINDS`` here, for every type of the mapping that no checkpoint serves
with a vision tower.
"""

from nnterp.reach_vision import VISION_KINDS

__all__ = ["VISION_KINDS"]
