"""Doge: the default block, except that it scales the residual by a learned vector before adding each sublayer.

``layer_mid = input_residual * layer_input + attention`` and
``layer_output = post_attention_residual * layer_mid + mlp``. What the
attention changes in the stream, ``layer_mid - layer_input``, is
``(input_residual - 1) * layer_input`` plus its output: a tensor the model
never holds, so it could be neither read in forward order nor written. The
contributions are unavailable; the sublayers' own outputs are their modules'
``output``, and the streams around them (``layer_input``, ``layer_mid``,
``layer_output``) are served as on every block. The mask the attention
interface receives carries Doge's dynamic per-key bias, so the scores include
it, as ALiBi's scores include theirs.
"""

from typing import Any

from torch import Tensor

from nnterp import Attention, Mlp, TinyConfig, unavailable
from nnterp.families import default

RESCALED = (
    "the block scales the residual by a learned {scale} before adding the {sublayer}'s output "
    "({stream} = {scale} * {residual} + output), so what the {sublayer} changes in the stream includes "
    "({scale} - 1) * {residual}, which no tensor of the model holds; the {sublayer}'s own output is {native}"
)


class RescaledResidualAttention(Attention):
    def score_bias(self) -> Tensor:
        """The dynamic mask the interface receives, ``[batch, num_heads, query, key]``: a learned bias per key where it keeps one."""
        return self.source.attention_interface_1.inputs[1]["attention_mask"]

    attention_output = unavailable(
        RESCALED.format(
            scale="input_residual", sublayer="attention", stream="layer_mid", residual="layer_input", native="self_attn.output[0]"
        )
    )


CROSS_DOMAIN_MOE = (
    "is_moe=True: the MLP is a dense part plus experts embedded by index, whose activation runs through the "
    "same act_fn first, so act_fn's output and down_proj's input are the dense part's alone"
)


def cross_domain_moe(envoy: Any) -> str | None:
    """Why the MLP has no one neuron tensor: Doge's CDMoE (``is_moe``); else None."""
    return CROSS_DOMAIN_MOE if envoy.root._module.config.is_moe else None


class RescaledResidualMlp(Mlp):
    mlp_activation = Mlp.mlp_activation.at(unavailable=cross_domain_moe)
    mlp_neurons = Mlp.mlp_neurons.at(unavailable=cross_domain_moe)
    mlp_output = unavailable(
        RESCALED.format(
            scale="post_attention_residual", sublayer="MLP", stream="layer_output", residual="layer_mid", native="mlp.output"
        )
    )


FAMILY = default.FAMILY.replace(
    name="doge",
    model_types=("doge",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": RescaledResidualAttention, "layers.*.mlp": RescaledResidualMlp},
    tiny={"doge": TinyConfig("doge", {"keep_window_size": 4})},
    skips={
        "doge": {
            "contribution": "the block scales the residual by a learned input_residual before adding",
            "contribution_at_every_step": "the block scales the residual by a learned input_residual before adding",
            "mid_stream": "the block scales the residual by a learned input_residual before adding",
        },
    },
    half_precision_failures={
        "doge": {
            "padded_rows_match_alone": (
                "the dynamic mask keeps each query's top keep_window_size keys by a bfloat16 score: where two scores "
                "round to one value, top-k keeps another key in a padded row than alone (from the window's end on)"
            ),
        },
    },
)
