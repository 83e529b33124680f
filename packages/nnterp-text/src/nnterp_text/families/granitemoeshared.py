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

from typing import Any

from nnterp import Layer, Mlp, Moe
from nnterp_text.families.granitemoe import ENVOYS as GRANITE_MOE
from nnterp_text.families.granitemoe import GraniteMoe, residual_multiplier
from nnterp_text.families.granitemoe import RENAME, project_on_vocab  # noqa: F401 - the family's logits

#: the binding ``hidden_states = moe_hidden_states + self.shared_mlp(hidden_states)`` in the block's forward
WITH_SHARED = "../source.hidden_states_4.output"

NO_SHARED_MLP = "this checkpoint has no shared MLP (shared_intermediate_size=0): every expert is routed"


def mixture_and_shared(envoy: Any) -> str:
    """Where the MLP's output is: the block's sum with the shared MLP, or the mixture's own output without one."""
    return "output" if envoy.parent._module.shared_mlp is None else WITH_SHARED


def no_shared_mlp(envoy: Any) -> str | None:
    """Why the block has no shared MLP beside its mixture, or None."""
    reason = envoy.no_mixture()
    if reason is not None:
        return reason
    return NO_SHARED_MLP if envoy.parent._module.shared_mlp is None else None


class SharedMlpLayer(Layer):
    sourced = True


class GraniteMoeShared(GraniteMoe):
    """The mixture plus the shared MLP, as the block adds them: ``(moe + shared_mlp) * residual_multiplier``."""

    mlp_output = Mlp.mlp_output.at(mixture_and_shared, select=None).scaled(residual_multiplier)
    mixture_output = Moe.mixture_output.at(mixture_and_shared, select=None).scaled(residual_multiplier)
    shared_expert_output = Moe.shared_expert_output.at(
        "../shared_mlp.output", unavailable=no_shared_mlp
    ).scaled(residual_multiplier)


ENVOYS = {**GRANITE_MOE, "layers.*": SharedMlpLayer, "layers.*.mlp": GraniteMoeShared}
