"""Beam: Gemma-2's sandwich block whose residual adds are depth-scaled, gated heads, and a sigmoid mixture on sparse blocks.

Each sublayer is added as ``post_norm(out) / sqrt(k) + stream * sqrt((k - 1) / k)``,
``k`` the add's index over the whole model (``2 * (layer + 1)`` for the
attention, one more for the MLP): a ``RescaledLayer``. The contributions are
the post norms' outputs divided by ``sqrt(k)``, as the block adds them (an
assignment is multiplied back), and what the depth scale changes in the stream
is ``layer_input_rescaling`` and ``layer_mid_rescaling``.

Each head's output is gated (``sigmoid(gate_proj(x) + gate_bias)``) before
``o_proj``. Full-attention blocks run without RoPE and scale their queries by
position before the interface: the queries served are the scaled ones. The
sparse blocks' router is DeepSeek-V3's (sigmoid, grouped, a selection bias,
renormalized) without the scaling: ``BeamMoE`` multiplies the experts' sum by
``routed_scaling_factor`` after they run, so ``routed_output`` is served times
that factor, the mixture's own sum, as on DeepSeek-V3, whose router scales the
weights instead. The logits are softcapped.
"""

import math
from typing import Any

from nnterp import GatedAttention, Moe, PostNormAttention, PostNormMlp, RescaledLayer, SandwichLayer, TinyConfig

from torch import Tensor

from . import deepseek_v3, gemma2


def _depth_scale(add: int) -> float:
    """What the stream is multiplied by at the model's ``add``-th residual add: ``sqrt((add - 1) / add)``."""
    return math.sqrt((add - 1) / add)


class BeamLayer(RescaledLayer, SandwichLayer):
    def rescaled_input(self, stream: Tensor) -> Tensor:
        return stream * _depth_scale(self._module.attn_residual_add_idx)

    def rescaled_mid(self, stream: Tensor) -> Tensor:
        return stream * _depth_scale(self._module.mlp_residual_add_idx)


def _attention_share(envoy: Any) -> float:
    return 1 / math.sqrt(envoy.parent._module.attn_residual_add_idx)


def _mlp_share(envoy: Any) -> float:
    return 1 / math.sqrt(envoy.parent._module.mlp_residual_add_idx)


def _routed_scale(envoy: Any) -> float:
    return float(envoy._module.routed_scaling_factor)


class BeamAttention(GatedAttention):
    attention_output = PostNormAttention.attention_output.scaled(_attention_share)


class BeamMoe(Moe):
    """The MLP of every block: dense (``BeamMLP``) or a sigmoid mixture (``BeamMoE``), whose sum is scaled after the experts."""

    SCORING = "sigmoid"
    mlp_output = PostNormMlp.mlp_output.scaled(_mlp_share)
    # BeamMoE multiplies the experts' sum by routed_scaling_factor: each slot's share of the mixture includes it
    expert_outputs = Moe.expert_outputs.scaled(_routed_scale)
    routed_output = Moe.routed_output.scaled(_routed_scale)


FAMILY = gemma2.FAMILY.replace(
    name="beam",
    model_types=("beam",),
    rename=deepseek_v3.FAMILY.rename,
    envoys={
        **gemma2.FAMILY.envoys,
        "layers.*": BeamLayer,
        "layers.*.self_attn": BeamAttention,
        "layers.*.mlp": BeamMoe,
    },
    # Beam's default n_group=8 cannot split the shrunk experts
    tiny={"beam": TinyConfig("beam", {"num_experts": 8, "n_group": 4, "topk_group": 2, "sliding_window": 4})},
)
