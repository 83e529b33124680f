"""Doge: the default block, except that it scales the residual by a learned vector before adding each sublayer.

``layer_mid = input_residual * layer_input + attention`` and
``layer_output = post_attention_residual * layer_mid + mlp``: a
``RescaledLayer``. The contributions are the sublayers' own outputs, and what
the learned vectors change in the stream is ``layer_input_rescaling`` and
``layer_mid_rescaling``. The mask the attention interface receives carries
Doge's dynamic per-key bias, so the scores include it, as ALiBi's scores
include theirs.
"""

from typing import Any

from nnterp import Attention, Mlp, RescaledLayer, TinyConfig
from nnterp.families import default

from torch import Tensor


class DogeLayer(RescaledLayer):
    def rescaled_input(self, stream: Tensor) -> Tensor:
        return self._module.input_residual * stream

    def rescaled_mid(self, stream: Tensor) -> Tensor:
        return self._module.post_attention_residual * stream


class DynamicMaskAttention(Attention):
    def score_bias(self) -> Tensor:
        """The dynamic mask the interface receives, ``[batch, num_heads, query, key]``: a learned bias per key where it keeps one."""
        return self.source.attention_interface_1.inputs[1]["attention_mask"]


CROSS_DOMAIN_MOE = (
    "is_moe=True: the MLP is a dense part plus experts embedded by index, whose activation runs through the "
    "same act_fn first, so act_fn's output and down_proj's input are the dense part's alone"
)


def cross_domain_moe(envoy: Any) -> str | None:
    """Why the MLP has no one neuron tensor: Doge's CDMoE (``is_moe``); else None."""
    return CROSS_DOMAIN_MOE if envoy.root._module.config.is_moe else None


class CrossDomainMlp(Mlp):
    mlp_activation = Mlp.mlp_activation.at(unavailable=cross_domain_moe)
    mlp_neurons = Mlp.mlp_neurons.at(unavailable=cross_domain_moe)


FAMILY = default.FAMILY.replace(
    name="doge",
    model_types=("doge",),
    envoys={
        **default.FAMILY.envoys,
        "layers.*": DogeLayer,
        "layers.*.self_attn": DynamicMaskAttention,
        "layers.*.mlp": CrossDomainMlp,
    },
    tiny={"doge": TinyConfig("doge", {"keep_window_size": 4})},
    half_precision_failures={
        "doge": {
            "padded_rows_match_alone": (
                "the dynamic mask keeps each query's top keep_window_size keys by a bfloat16 score: where two scores "
                "round to one value, top-k keeps another key in a padded row than alone (from the window's end on)"
            ),
        },
    },
)
