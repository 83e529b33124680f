"""Granite SWA: Granite's scaled block, with sliding windows and a sink that scales each head's output (``ScaledSinkAttention``)."""

from nnterp import GraniteAttention, TinyConfig

from . import granite
from .granite import GRANITE_SCALES
from .sinks import ScaledSinkAttention


class GraniteSWAAttention(ScaledSinkAttention, GraniteAttention):
    """The sink-scaled interior, and the contribution scaled by ``residual_multiplier``."""


FAMILY = granite.FAMILY.replace(
    name="granite_swa",
    model_types=("granite_swa",),
    envoys={**granite.FAMILY.envoys, "layers.*.self_attn": GraniteSWAAttention},
    tiny={
        "granite_swa": TinyConfig(
            "granite_swa", {**GRANITE_SCALES, "sliding_window": 4, "layer_rope_theta": [10000.0, 0]}
        )
    },
)
