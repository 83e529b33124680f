"""Sublayers whose output the block multiplies by ``residual_multiplier`` before adding it to the stream.

The contributions are the scaled outputs (what the block adds), served as
``output * residual_multiplier`` and written back divided. Granite's block
(``GraniteAttention``, ``GraniteMlp``), and the blocks built on it: Granite-SWA,
Granite-MoE(-Shared, -SWA, -Hybrid, whose Mamba-2 mixer is scaled too) and
HyperCLOVA X's. Granite-MoE's mixture (``GraniteMoe``) and Granite-MoE-Shared's,
with its dense ``shared_mlp`` beside it in the block (``GraniteMoeShared``, in a
``SharedMlpLayer``), are scaled the same way.
"""

from typing import Any

from .attention import Attention
from .layer import Layer
from .mixtures import TopKFirstMoe
from .mlp import Mlp
from .moe import Moe


def residual_multiplier(envoy: Any) -> float:
    """The factor the block applies to this sublayer's output: the block's ``residual_multiplier``."""
    return envoy.parent._module.residual_multiplier


class GraniteAttention(Attention):
    """An attention whose contribution is its output times the block's ``residual_multiplier``.

    The attention's own ``attention_multiplier`` is its softmax scale and changes nothing here.
    """

    attention_output = Attention.attention_output.scaled(residual_multiplier)


class GraniteMlp(Mlp):
    """An MLP whose contribution is its output times the block's ``residual_multiplier``."""

    mlp_output = Mlp.mlp_output.scaled(residual_multiplier)


class GraniteMoe(TopKFirstMoe):
    """GPT-OSS's top-k-first mixture, each value the block adds scaled by ``residual_multiplier``.

    The block adds the mixture's output times ``residual_multiplier``, so
    ``mlp_output``, ``mixture_output``, ``routed_output`` and ``expert_outputs``
    are served scaled, as the block adds them, and written back divided.
    """

    mlp_output = TopKFirstMoe.mlp_output.scaled(residual_multiplier)
    mixture_output = TopKFirstMoe.mixture_output.scaled(residual_multiplier)
    routed_output = TopKFirstMoe.routed_output.scaled(residual_multiplier)
    expert_outputs = TopKFirstMoe.expert_outputs.scaled(residual_multiplier)


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
    """A Granite-MoE-Shared block: instrumented when built (``sourced``), its sum of mixture and shared MLP read while it runs."""

    sourced = True


class GraniteMoeShared(GraniteMoe):
    """The mixture plus the block's shared MLP, as the block adds them: ``(moe + shared_mlp) * residual_multiplier``.

    ``shared_mlp`` is the mixture's sibling in the block, not its child:
    ``shared_expert_output`` is its output, scaled like the rest. Without a
    shared MLP (``shared_intermediate_size=0``) the contribution is the
    mixture's output, as on Granite-MoE, and ``shared_expert_output`` says so.
    Its block is a ``SharedMlpLayer``.
    """

    mlp_output = Mlp.mlp_output.at(mixture_and_shared, select=None).scaled(residual_multiplier)
    mixture_output = Moe.mixture_output.at(mixture_and_shared, select=None).scaled(residual_multiplier)
    shared_expert_output = Moe.shared_expert_output.at("../shared_mlp.output", unavailable=no_shared_mlp).scaled(
        residual_multiplier
    )
