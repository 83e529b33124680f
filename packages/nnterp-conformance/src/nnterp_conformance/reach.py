"""Why a model type of transformers' causal-LM mapping has no family yet: what the report says of it.

The reasons are written once, in core (``nnterp.reach``), where a load refuses
such a type with its reason; the report reads them here.
"""

from nnterp.reach import KINDS, REASONS, RECURRENT_KINDS, STRUCTURE, VISION_NOT_YET

__all__ = ["KINDS", "REASONS", "RECURRENT_KINDS", "STRUCTURE", "VISION_NOT_YET"]
