"""Granite-MoE SWA: Granite-MoE-Shared's block with Granite SWA's sliding-window, sink-scaled attention."""

from nnterp import TinyConfig

from . import granitemoeshared
from .granite import GRANITE_SCALES
from .granite_swa import GraniteSWAAttention

FAMILY = granitemoeshared.FAMILY.replace(
    name="granitemoe_swa",
    model_types=("granitemoe_swa",),
    envoys={**granitemoeshared.FAMILY.envoys, "layers.*.self_attn": GraniteSWAAttention},
    tiny={
        "granitemoe_swa": TinyConfig(
            "granitemoe_swa",
            {**GRANITE_SCALES, "shared_intermediate_size": 32, "sliding_window": 4, "layer_rope_theta": [10000.0, 0]},
        )
    },
    skips={
        "granitemoe_swa": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
