"""ZAYA: a block that rescales the residual stream itself, and routes with a state carried from block to block.

Each sublayer is added through ``ResidualScaling``: ``(out + b) * s + (x + b') * s'``
with learned ``s, s', b, b'``: a ``RescaledLayer``. A contribution is the
sublayer's output as the block adds it, ``(out + b) * s``, read inside that
module (``hidden_states_0``), and what the affine map does to the stream is
``layer_input_rescaling`` and ``layer_mid_rescaling``, ``(x + b') * s' - x``.
The block returns ``(stream, router state)``; a skipped block hands on the
router state it received.

The MLP is a mixture. Its ``router`` (``gate``) runs its own MLP on a
down-projection of the stream plus the state carried from the block before,
over ``num_experts + 1`` classes: the last is a skip expert that computes
nothing. It softmaxes the logits, chooses the top-k of the probabilities plus
``balancing_biases`` (the skip class biased by -1), and weighs by the
unbiased probabilities; a slot that chose the skip expert is then handed to
the experts as expert 0 with weight 0. The routing values are read before that
masking, so ``expert_indices`` shows the skip expert as index ``num_experts``
and writing that index skips the slot; ``num_experts`` counts the skip class,
as ``router_logits`` does. Its bias of -1 outweighs any probability, so on a
checkpoint whose ``balancing_biases`` are the initial ones, raising the skip
class's logit does not make a token choose it (``routable_experts`` leaves it out).
"""

from typing import Any

from nnterp import Attention, Layer, Moe, RescaledLayer, TinyConfig
from nnterp.families import default

from torch import Tensor

from .glm_moe_dsa import CarryingLayer

#: what ResidualScaling adds for the sublayer: ``(out + b) * s``, the first binding of its forward
SCALED_OUTPUT = "source.hidden_states_0.output"


def _affine(scaling: Any, stream: Tensor) -> Tensor:
    """What a ResidualScaling module makes of the stream it adds a sublayer to: ``(stream + b') * s'``."""
    return (stream + scaling.residual_bias) * scaling.residual_scale


ROUTER_STATE = "the block hands the next one a router state computed from its stream, beside the stream"


class ZayaLayer(RescaledLayer, CarryingLayer):
    carried = ("prev_router_hidden_states", 1)

    def read_beside_the_stream(self) -> str | None:
        return ROUTER_STATE if self.index < self.root.num_layers - 1 else None

    # the stream ResidualScaling returns, kept in float32: the norm reads a cast of it, which under a half-precision
    # load is another tensor, feeding the MLP alone (a write there would miss the residual path)
    layer_mid = Layer.layer_mid.at("post_attention_residual_scale.output")

    def rescaled_input(self, stream: Tensor) -> Tensor:
        return _affine(self._module.post_attention_residual_scale, stream)

    def rescaled_mid(self, stream: Tensor) -> Tensor:
        return _affine(self._module.post_mlp_residual_scale, stream)


class ZayaAttention(Attention):
    attention_output = Attention.attention_output.at(f"../post_attention_residual_scale.{SCALED_OUTPUT}", select=None)


class ZayaMoe(Moe):
    """A softmax mixture with a skip expert, its choice biased by ``balancing_biases``; read before the skip is masked."""

    LOGITS = "router.source.self_router_mlp_0"
    NORMALIZE = False
    mlp_output = Moe.mlp_output.at(f"../post_mlp_residual_scale.{SCALED_OUTPUT}", select=None)
    expert_indices = Moe.expert_indices.at("router.source.torch_topk_0.output", select=1)
    expert_weights = Moe.expert_weights.at("router.source.torch_gather_0.output", select=None)

    @property
    def num_experts(self) -> int:
        """The router's classes, the width of ``router_logits``: the config's experts and, last, the skip expert."""
        return self.router._module.num_router_classes

    def selection_bias(self) -> Tensor:
        return self.router._module.balancing_biases

    def routable_experts(self) -> list[int]:
        """The real experts: the skip class's bias of -1 outweighs any probability a raised logit can give it."""
        return list(range(self.num_experts - 1))


FAMILY = default.FAMILY.replace(
    name="zaya",
    model_types=("zaya",),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={
        **default.FAMILY.envoys,
        "layers.*": ZayaLayer,
        "layers.*.self_attn": ZayaAttention,
        "layers.*.mlp": ZayaMoe,
    },
    tiny={"zaya": TinyConfig("zaya", {"num_hidden_layers": 3, "num_experts_per_tok": 1, "router_hidden_size": 32})},
    skips={
        "zaya": {
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "one expert per token",
            "zeroed_slot_leaves_the_sum": "one expert per token",
        },
    },
    half_precision_failures={
        "zaya": {
            "routing_follows_scoring": (
                "the router takes top-k of a softmax computed in bfloat16: where experts' probabilities round to one "
                "value (three of five at one token of the tiny checkpoint) it may pick any, the kit's float32 scoring another"
            ),
        },
    },
)
