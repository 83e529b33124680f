"""Beam: Gemma-2's sandwich block whose residual adds are depth-scaled, gated heads, and a sigmoid mixture on sparse blocks.

Each sublayer is added as ``post_norm(out) / sqrt(k) + stream * sqrt((k - 1) / k)``,
``k`` the add's index over the whole model (``2 * (layer + 1)`` for the
attention, one more for the MLP): the block rescales the stream itself, so
what a sublayer changes in the stream includes ``(sqrt((k - 1) / k) - 1) *
stream``, which no tensor of the model holds, and both contributions are
unavailable. The streams (``layer_input``, ``layer_mid``, ``layer_output``),
the pre-norms' outputs and the attention's interior are served.

Each head's output is gated (``sigmoid(gate_proj(x) + gate_bias)``) before
``o_proj``. Full-attention blocks run without RoPE and scale their queries by
position before the interface: the queries served are the scaled ones. The
sparse blocks' router is DeepSeek-V3's (sigmoid, grouped, a selection bias,
renormalized) without the scaling: ``BeamMoE`` multiplies the experts' sum by
``routed_scaling_factor`` after they run, so ``routed_output`` is served times
that factor, the mixture's own sum, as on DeepSeek-V3, whose router scales the
weights instead. The logits are softcapped.
"""

from typing import Any

from nnterp import GatedAttention, Moe, TinyConfig, unavailable

from . import deepseek_v3, gemma2

DEPTH_SCALED = (
    "Beam adds the {sublayer} as {stream} = sqrt((k - 1) / k) * {residual} + {native} / sqrt(k), with k = {k}: "
    "the residual itself is rescaled, so what the {sublayer} changes in the stream includes "
    "(sqrt((k - 1) / k) - 1) * {residual}, which no tensor of the model holds; read {native} (the {sublayer}'s "
    "post-normed output, added divided by sqrt(k))"
)


def _routed_scale(envoy: Any) -> float:
    return float(envoy._module.routed_scaling_factor)


class BeamAttention(GatedAttention):
    attention_output = unavailable(
        DEPTH_SCALED.format(
            sublayer="attention", stream="layer_mid", residual="layer_input", k="2 * (layer + 1)",
            native="post_attention_layernorm.output",
        )
    )


class BeamMoe(Moe):
    """The MLP of every block: dense (``BeamMLP``) or a sigmoid mixture (``BeamMoE``), whose sum is scaled after the experts."""

    SCORING = "sigmoid"
    mlp_output = unavailable(
        DEPTH_SCALED.format(
            sublayer="MLP", stream="layer_output", residual="layer_mid", k="2 * (layer + 1) + 1",
            native="post_feedforward_layernorm.output",
        )
    )
    # BeamMoE multiplies the experts' sum by routed_scaling_factor: each slot's share of the mixture includes it
    expert_outputs = Moe.expert_outputs.scaled(_routed_scale)
    routed_output = Moe.routed_output.scaled(_routed_scale)


FAMILY = gemma2.FAMILY.replace(
    name="beam",
    model_types=("beam",),
    rename=deepseek_v3.FAMILY.rename,
    envoys={**gemma2.FAMILY.envoys, "layers.*.self_attn": BeamAttention, "layers.*.mlp": BeamMoe},
    # Beam's default n_group=8 cannot split the shrunk experts
    tiny={"beam": TinyConfig("beam", {"num_experts": 8, "n_group": 4, "topk_group": 2, "sliding_window": 4})},
    skips={
        "beam": {
            "contribution": "Beam adds the attention as layer_mid = sqrt((k - 1) / k) * layer_input",
            "contribution_at_every_step": "Beam adds the attention as layer_mid = sqrt((k - 1) / k) * layer_input",
            "mid_stream": "Beam adds the attention as layer_mid = sqrt((k - 1) / k) * layer_input",
        },
    },
)
