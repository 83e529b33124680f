"""Granite-MoE-Shared: Granite-MoE's block, with a dense ``shared_mlp`` added to the mixture's output inside the block.

The block adds ``(block_sparse_moe(x) + shared_mlp(x)) * residual_multiplier``,
so the MLP's contribution is that sum, the binding ``hidden_states = moe +
shared`` in the block's forward, scaled; the block is instrumented when built
(``sourced``) since it is read while the block runs. ``shared_mlp`` is the
mixture's sibling in the block, not its child: ``shared_expert_output`` is its
output, scaled like the rest. Without a shared MLP (``shared_intermediate_size=0``)
the contribution is the mixture's output, as on Granite-MoE, and
``shared_expert_output`` says so.
"""

from nnterp import GraniteMoeShared, SharedMlpLayer, TinyConfig

from . import granitemoe
from .granite import GRANITE_SCALES

FAMILY = granitemoe.FAMILY.replace(
    name="granitemoeshared",
    model_types=("granitemoeshared",),
    envoys={**granitemoe.FAMILY.envoys, "layers.*": SharedMlpLayer, "layers.*.mlp": GraniteMoeShared},
    tiny={
        "granitemoeshared": TinyConfig("granitemoeshared", {**GRANITE_SCALES, "shared_intermediate_size": 32}),
        # without its shared MLP
        "granitemoeshared-noshared": TinyConfig("granitemoeshared", {**GRANITE_SCALES, "shared_intermediate_size": 0}),
    },
    skips={
        "granitemoeshared": {
            "neurons_make_contribution": "a mixture of experts",
        },
        "granitemoeshared-noshared": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
