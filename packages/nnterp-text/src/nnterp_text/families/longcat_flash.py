"""LongCat-Flash: two attention and MLP sub-blocks per layer, and a shortcut mixture of experts added at the layer's end.

A layer computes ``h1 = x + attn0(in0(x))``, ``h2 = h1 + mlps[0](post0(h1))``,
``h3 = h2 + attn1(in1(h2))`` and returns ``h3 + mlps[1](post1(h3)) + moe(post0(h1))``:
the mixture (``mlp``) reads what the first MLP reads and is added last. So the
layer adds five terms: ``self_attn.attention_output`` (the first sub-block's
attention, ``self_attn[0]``), ``first_mlp_output`` (``mlps[0]``),
``second_attention_output`` (``self_attn[1]``), ``second_mlp_output``
(``mlps[1]``) and ``mlp.mlp_output`` (the shortcut mixture), and
``layer_output`` is ``layer_input`` plus them. ``self_attn``'s interior and
sizes are the first attention's; the second's are at ``self_attn[1]``.
``layer_mid`` is the stream after that first attention, ``layer_input +
self_attn[0]``'s output, where the mixture's norm reads it. The mixture is a softmax router over the routed experts and
``zero_expert_num`` identity experts, its choice biased by
``e_score_correction_bias``, its weights scaled by ``routed_scaling_factor``.

The identity experts do not run in the experts module: the mixture's forward
takes their slots' output (``hidden_states`` times their weights) itself, hands
those slots to the experts module as real experts with weight 0, and adds the
identity output to what the experts return. So the routing is read where the
mixture receives it, the router's output: ``expert_indices`` holds the identity
experts' own indices (``n_routed_experts`` and up), ``expert_weights`` their
weights. ``routed_output`` is the mixture's output, the identity experts'
included, and no tensor holds each slot's weighted output (``expert_outputs``)
when the mixture has identity experts.
"""

from typing import Any, ClassVar

from nnterp import Attention, EProperty, Layer, Moe, TinyConfig, each_interior, needs_grouped_experts
from nnterp.families import default
from nnterp.layouts import Residual

from torch import Tensor


class LongcatFlashLayer(Layer):
    """Two attention and MLP sub-blocks and a shortcut mixture: the first sub-block's norms are the block's.

    ``input_layernorm[0]`` before ``self_attn[0]``, ``post_attention_layernorm[0]``
    before the first MLP and the mixture. The second sub-block's outputs are
    terms of their own.
    """

    norm_readers: ClassVar[dict[str, str]] = {
        Layer.attention_norm_output.name: "self_attn.0.input",
        Layer.mlp_norm_output.name: "mlp.input",
    }

    attention_norm_output = Layer.attention_norm_output.at("input_layernorm.0.output")
    layer_mid = Layer.layer_mid.at("post_attention_layernorm.0.input")
    mlp_norm_output = Layer.mlp_norm_output.at("post_attention_layernorm.0.output")

    @EProperty("mlps.0.output", "What the first dense MLP adds to the stream")
    def first_mlp_output(self, value: Tensor) -> Residual:
        """The first sub-block's dense MLP output, ``mlps[0]``, ``[batch, seq, hidden_size]``: added to ``layer_mid``."""
        return value

    @EProperty("self_attn.1.output", "What the second attention adds to the stream", select=0)
    def second_attention_output(self, value: Tensor) -> Residual:
        """The second sub-block's attention output, ``self_attn[1]``, ``[batch, seq, hidden_size]``.

        Added to the stream after the first MLP; its interior is ``self_attn[1]``'s, natively.
        """
        return value

    @EProperty("mlps.1.output", "What the second dense MLP adds to the stream")
    def second_mlp_output(self, value: Tensor) -> Residual:
        """The second sub-block's dense MLP output, ``mlps[1]``, ``[batch, seq, hidden_size]``: added last, with the mixture's."""
        return value

    def contributions(self) -> tuple[str, ...]:
        # in the order the layer computes them: the shortcut mixture runs before the first dense MLP, and is added last
        return (
            "self_attn.attention_output",
            "mlp.mlp_output",
            "first_mlp_output",
            "second_attention_output",
            "second_mlp_output",
        )

    def read_again(self) -> tuple[str, ...]:
        # the second sub-block reads the stream the first MLP's and the second attention's outputs were added into
        return ("first_mlp_output", "second_attention_output")


@each_interior(lambda value: value.at(f"0.{value.key}"))
class LongcatFlashAttention(Attention):
    """The first sub-block's latent attention, ``self_attn[0]``, on the shared interface."""

    attention_output = Attention.attention_output.at("0.output", select=0)

    def _first(self, *names: str) -> Any:
        """A size of the first sub-block's attention module (``self_attn`` itself is the ModuleList holding both)."""
        first = self._module[0]
        return next((getattr(first, name) for name in names if getattr(first, name, None) is not None), None)


IDENTITY_SLOTS = (
    "the identity experts' slots run outside the experts module: the mixture hands them to it as real experts "
    "with weight 0 and adds their output (hidden_states times their weights) after it, so no tensor holds every "
    "slot's weighted output; zero a slot's expert_weights to see what it adds"
)


def identity_slots_apart(envoy: "LongcatFlashMoe") -> str | None:
    """Why the per-slot expert outputs are unavailable: the grouped forward's reason, or the identity experts' slots outside it."""
    reason = needs_grouped_experts(envoy)
    if reason is not None:
        return reason
    return IDENTITY_SLOTS if envoy._module.zero_expert_num else None


class LongcatFlashMoe(Moe):
    """The shortcut mixture: routed experts and identity experts, all routable.

    The routing is the router's output, ``(router_logits, weights, indices)``,
    which the mixture consumes: it runs the identity experts itself and gives
    the experts module their slots remapped to weight-0 dummies, so the
    experts module's arguments no longer say which expert a slot chose.
    """

    expert_weights = Moe.expert_weights.at("router.output", select=1)
    expert_indices = Moe.expert_indices.at("router.output", select=2)
    expert_outputs = Moe.expert_outputs.at(unavailable=identity_slots_apart)
    # the experts' output plus the identity experts' (no shared expert, no norm after it): the mixture's own output
    routed_output = Moe.routed_output.at("output", select=0)

    @property
    def num_experts(self) -> int:
        """The router's classes, the width of ``router_logits``: the routed experts, then the identity experts."""
        return int(self.router._module.n_routed_experts)


FAMILY = default.FAMILY.replace(
    name="longcat_flash",
    model_types=("longcat_flash",),
    rename={**default.FAMILY.rename, "self_attn.0.o_proj": "self_attn.o_proj"},
    envoys={
        **default.FAMILY.envoys,
        "layers.*": LongcatFlashLayer,
        "layers.*.self_attn": LongcatFlashAttention,
        "layers.*.mlp": LongcatFlashMoe,
    },
    # RoPE is sized by head_dim, which must equal qk_rope_head_dim; the aliased sizes are not shrunk by name
    tiny={
        "longcat_flash": TinyConfig(
            "longcat_flash",
            {
                "zero_expert_num": 2,
                "head_dim": 8,
                "num_key_value_heads": 4,
                "moe_topk": 2,
                "ffn_hidden_size": 128,
                "expert_ffn_hidden_size": 32,
            },
        )
    },
    skips={
        "longcat_flash": {
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "the identity experts' slots run outside the experts module",
        },
    },
)
