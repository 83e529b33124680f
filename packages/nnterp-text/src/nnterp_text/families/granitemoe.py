"""Granite-MoE: Granite's scaled block with its mixture of experts at ``block_sparse_moe``.

The ``router`` takes the top-k of the raw logits and softmaxes only those,
as GPT-OSS's does (``TopKFirstMoe``). The block adds the mixture's output
times ``residual_multiplier``, so ``mlp_output``, ``mixture_output``,
``routed_output`` and ``expert_outputs`` are served scaled, as the block adds
them, and written back divided.
"""

from nnterp import GraniteMoe, TinyConfig

from . import granite
from .granite import GRANITE_SCALES

FAMILY = granite.FAMILY.replace(
    name="granitemoe",
    model_types=("granitemoe",),
    rename={**granite.FAMILY.rename, "block_sparse_moe": "mlp"},
    envoys={**granite.FAMILY.envoys, "layers.*.mlp": GraniteMoe},
    tiny={"granitemoe": TinyConfig("granitemoe", GRANITE_SCALES)},
    skips={
        "granitemoe": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
