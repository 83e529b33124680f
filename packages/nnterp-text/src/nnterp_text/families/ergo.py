"""Ergo: Beam's sandwich block on a learned residual gate, and DeepSeek-V3's sigmoid mixture whose experts each end
in a norm of their own.

Each sublayer's post norm output ``h`` is added to the stream ``x`` by a
learned gate per hidden channel (``ErgoResidualGate``, weight ``w``):
``sigmoid(w) * h + sqrt(1 + sigmoid(w)) * exp(-softplus(w) / 2) * x``: a
``RescaledLayer``, as on Beam, whose depth scale is a number where this gate
is a vector. The contributions are the post norms' outputs times
``sigmoid(w)``, as the gate adds them (an assignment is divided back), and
what the gate makes of the stream is ``layer_input_rescaling`` and
``layer_mid_rescaling``. The stream and the norms are kept in float32.

Every fourth block attends to the whole context without RoPE (its queries and
keys multiplied by ``sqrt(global_attention_scale)`` where the config sets it,
before the interface, where they are read); the others attend within a
sliding window with RoPE. The attention projects queries, keys and values at
once (``qkv_proj``). The sparse blocks' router scores with a sigmoid
(``ErgoTopkRouter``: its logits are ``linear``'s float32 output), chooses by
the scores plus a selection bias, always renormalizes and scales by
``moe_routed_scaling_factor``; each route's output passes through its
expert's own RMSNorm (``post_expert_norm``) before the experts' forward
weighs and sums the routes in its own arithmetic, so no tensor holds the
weighted slots side by side. The shared expert ends in a norm too, inside it.
"""

from typing import Any

from nnterp import Moe, PostNormAttention, PostNormMlp, RescaledLayer, SandwichLayer, SigmoidMoe, TinyConfig

import torch
from torch import Tensor
from torch.nn import functional as F

from . import beam


def _residual_gate(gate: Any) -> Tensor:
    """What ``ErgoResidualGate`` multiplies the stream by: ``sqrt(1 + sigmoid(w)) * exp(-softplus(w) / 2)``."""
    weight = gate.weight.float()
    return torch.sqrt(1.0 + weight.sigmoid()) * torch.exp(-0.5 * F.softplus(weight))


def _attention_share(envoy: Any) -> Tensor:
    return envoy.parent._module.attention_residual_gate.weight.float().sigmoid()


def _mlp_share(envoy: Any) -> Tensor:
    return envoy.parent._module.feedforward_residual_gate.weight.float().sigmoid()


class ErgoLayer(RescaledLayer, SandwichLayer):
    def rescaled_input(self, stream: Tensor) -> Tensor:
        return _residual_gate(self._module.attention_residual_gate) * stream

    def rescaled_mid(self, stream: Tensor) -> Tensor:
        return _residual_gate(self._module.feedforward_residual_gate) * stream


class ErgoAttention(PostNormAttention):
    attention_output = PostNormAttention.attention_output.scaled(_attention_share)


NORMED_ROUTES = (
    "Ergo's experts norm each route's output with its expert's own RMSNorm (post_expert_norm) after the experts' "
    "kernel, then weigh and sum the routes in ErgoExperts.forward's own arithmetic, so the slots' weighted outputs "
    "are never held side by side: read experts.post_expert_norm's output (each route's normed output, one row per "
    "token and slot, before its weight) instead"
)


def _normed_routes(envoy: Any) -> str | None:
    return envoy.no_mixture() or NORMED_ROUTES


class ErgoMoe(SigmoidMoe):
    """The MLP of every block: dense (``ErgoMLP``) or the sigmoid mixture (``ErgoMoE``), added through the gate."""

    LOGITS = "router.linear"
    NORMALIZE = True
    mlp_output = PostNormMlp.mlp_output.scaled(_mlp_share)
    expert_outputs = Moe.expert_outputs.at(unavailable=_normed_routes)


FAMILY = beam.FAMILY.replace(
    name="ergo",
    model_types=("ergo",),
    envoys={**beam.FAMILY.envoys, "layers.*": ErgoLayer, "layers.*.self_attn": ErgoAttention, "layers.*.mlp": ErgoMoe},
    project_on_vocab=None,
    # a sliding, a full (scaled queries and keys) and a sliding block; a dense MLP, then two mixtures
    tiny={
        "ergo": TinyConfig(
            "ergo",
            {
                "num_hidden_layers": 3,
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                "mlp_layer_types": ["dense", "sparse", "sparse"],
                "first_dense_intermediate_size": 64,
                "shared_intermediate_size": 32,
                "sliding_window": 4,
                "global_attention_scale": 2.0,
            },
        )
    },
    skips={"ergo": {"rerouted_slot_runs_the_new_expert": "are never held side by side"}},
)
