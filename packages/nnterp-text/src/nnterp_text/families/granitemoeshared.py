"""Granite-MoE-Shared: Granite-MoE's block, with a dense ``shared_mlp`` added to the mixture's output inside the block.

The block adds ``(block_sparse_moe(x) + shared_mlp(x)) * residual_multiplier``,
so the MLP's contribution is that sum, the binding ``hidden_states = moe +
shared`` in the block's forward, scaled; the block is instrumented when built
(``sourced``) since it is read while the block runs. Without a shared MLP
(``shared_intermediate_size=0``) it is the mixture's output, as on Granite-MoE.
"""

from typing import Any

from nnterp import Layer, Mlp
from nnterp_text.families.granite import residual_multiplier
from nnterp_text.families.granitemoe import ENVOYS as GRANITE_MOE
from nnterp_text.families.granitemoe import RENAME, project_on_vocab  # noqa: F401 - the family's logits

#: the binding ``hidden_states = moe_hidden_states + self.shared_mlp(hidden_states)`` in the block's forward
WITH_SHARED = "../source.hidden_states_4.output"


def mixture_and_shared(envoy: Any) -> str:
    """Where the MLP's output is: the block's sum with the shared MLP, or the mixture's own output without one."""
    return "output" if envoy.parent._module.shared_mlp is None else WITH_SHARED


class SharedMlpLayer(Layer):
    sourced = True


class SharedMlp(Mlp):
    """The mixture plus the shared MLP, as the block adds them: ``(moe + shared_mlp) * residual_multiplier``."""

    mlp_output = Mlp.mlp_output.at(mixture_and_shared, select=None).scaled(residual_multiplier)


ENVOYS = {**GRANITE_MOE, "layers.*": SharedMlpLayer, "layers.*.mlp": SharedMlp}
