"""Gemma-4 (text): Gemma-2's sandwich block and softcapped logits, with two terms after the MLP.

After adding the MLP's post-normed output the block adds a per-layer-input
term (``hidden_size_per_layer_input > 0``), ``per_layer_input_output``, and
then multiplies the whole stream in place by ``layer_scalar``, a per-layer
buffer the checkpoint sets (one in a fresh model, not one in general):
``layer_output = layer_scalar * (layer_mid + mlp + per_layer)``. What that
multiplication changes is ``layer_output_rescaling``, ``(layer_scalar - 1)``
times the sum, so the contributions are the post norms' outputs as on Gemma-2
and the stream is their sum with both terms. Head widths differ by layer type
(``head_dim`` on sliding layers, ``global_head_dim`` on full ones), and each
block's sizes are read off its module.

With ``enable_moe_block`` the block also runs a mixture beside the dense MLP:
its ``router`` and ``experts`` are the block's children, so the dense MLP's
envoy hosts the routing values (``../router``, ``../experts``). The router
softmaxes its ``proj`` logits, takes the top-k, renormalizes them and
multiplies each by its expert's ``per_expert_scale``. The block norms the
dense and the routed outputs apart (``post_feedforward_layernorm_1`` / ``_2``)
before adding them, so the dense MLP is no additive shared expert and
``mixture_output`` is the routed experts' sum, before ``_2``.
"""

from typing import Any

from nnterp import Layer, Moe, PostNormMlp, SandwichLayer, ScaledOutputLayer, TinyConfig
from nnterp.components.moe import WEIGHTED_SLOTS
from nnterp.reasons import NO_PER_LAYER_INPUT

from torch import Tensor

from . import gemma2

NO_EXPERTS = (
    "this Gemma-4 block runs no mixture (enable_moe_block off, or a Gemma-4 unified block, which has none): "
    "its MLP is dense, and the block has no router or experts"
)
NORMED_APART = (
    "Gemma-4's dense MLP runs beside the experts on every token, but the block norms each output apart "
    "(post_feedforward_layernorm_1 / _2) and norms their sum, so neither adds to the other: read mlp.output "
    "(the dense MLP's own output) or post_feedforward_layernorm_1.output (as the block adds it) instead"
)


class ScaledStreamMlp(Moe, PostNormMlp):
    """The dense MLP, hosting the block's mixture where the checkpoint has one."""

    mlp_output = PostNormMlp.mlp_output

    LOGITS = "../router.proj"
    NORMALIZE = True
    expert_weights = Moe.expert_weights.at("../experts.inputs")
    expert_indices = Moe.expert_indices.at("../experts.inputs")
    expert_outputs = Moe.expert_outputs.at(f"../{WEIGHTED_SLOTS}.output")
    routed_output = Moe.routed_output.at("../experts.output")
    mixture_output = Moe.mixture_output.at("../experts.output", select=None)
    shared_expert_output = Moe.shared_expert_output.at(unavailable=lambda envoy: envoy.no_mixture() or NORMED_APART)

    def no_mixture(self) -> str | None:
        return None if getattr(self.parent._module, "enable_moe_block", False) else NO_EXPERTS

    @property
    def router(self) -> Any:
        return self.parent.router

    def experts_module(self) -> Any:
        """The block's experts, beside this MLP."""
        return self.parent.experts

    @property
    def num_experts(self) -> int:
        return self.experts_module()._module.num_experts

    @property
    def top_k(self) -> int:
        return self.root._module.config.get_text_config().top_k_experts

    def route(self, router_logits: Tensor) -> tuple[Tensor, Tensor]:
        weights, indices = super().route(router_logits)
        return weights * self.parent.router._module.per_expert_scale[indices].float(), indices


PER_LAYER_INPUTS = (
    "the model projects every block's per-layer input from the embeddings (layers[0].layer_input), so later blocks "
    "read them beside the stream"
)


def _no_per_layer_input(block: Any) -> str | None:
    return None if getattr(block._module, "hidden_size_per_layer_input", None) else NO_PER_LAYER_INPUT


class PerLayerInputLayer(SandwichLayer):
    """Gemma 2's sandwich block, on a model that feeds every block a per-layer input made from the embeddings."""

    def read_beside_the_stream(self) -> str | None:
        return (
            PER_LAYER_INPUTS if self.index == 0 and getattr(self._module, "hidden_size_per_layer_input", None) else None
        )

    per_layer_input_output = Layer.per_layer_input_output.at(
        "post_per_layer_input_norm.output", unavailable=_no_per_layer_input
    )


class ScaledStreamLayer(ScaledOutputLayer, PerLayerInputLayer):
    """Gemma 4's block: the per-layer input's term, then the whole stream multiplied by ``layer_scalar``."""

    def output_scale(self) -> Tensor:
        return self._module.layer_scalar


#: per-layer head widths and inputs shrunk, and a softcap that bites
SIZES = {
    "head_dim": 16,
    "global_head_dim": 32,
    "hidden_size_per_layer_input": 16,
    "vocab_size_per_layer_input": 320,
    "sliding_window": 4,
    "final_logit_softcapping": 3.0,
}

FAMILY = gemma2.FAMILY.replace(
    name="gemma4_text",
    model_types=("gemma4_text", "gemma4_unified_text"),
    envoys={**gemma2.FAMILY.envoys, "layers.*": ScaledStreamLayer, "layers.*.mlp": ScaledStreamMlp},
    tiny={
        **{model_type: TinyConfig(model_type, {**SIZES}) for model_type in ("gemma4_text", "gemma4_unified_text")},
        # its mixture switched on
        "gemma4_text-moe": TinyConfig(
            "gemma4_text",
            {**SIZES, "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32},
        ),
    },
)
