"""MiniMax (MiniMax-Text-01): lightning attention blocks (``linear_attn``) and softmax attention blocks, each with Mixtral's mixture.

The block keeps no stream of its own: it carries on from its input's
norm, ``h = alpha * input_layernorm(x) + beta * mixer(input_layernorm(x))``,
then ``alpha' * post_attention_layernorm(h) + beta' * mlp(post_attention_layernorm(h))``
(the factors from the config, per kind of block). An RMSNorm rescales each
token, so this is a ``RescaledLayer``: the block makes ``alpha * norm(x)`` of
its stream before adding ``beta`` times the sublayer, ``layer_input_rescaling``
is ``alpha * attention_norm_output - layer_input`` (``layer_mid_rescaling``
the same around the MLP), and the contributions are the sublayers' outputs
times ``beta``, as the block adds them. Both mixers are ``self_attn``
natively; the lightning blocks' is aliased ``linear_attn`` by its class.
"""

from typing import Any

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import Attention, MixtralMoe, RescaledLayer
from nnterp.families import default
from nnterp.tiny import TinyConfig

from torch import Tensor
from transformers.models.minimax import modeling_minimax as modeling

from ..components.lightning import LightningAttention
from ..family import RecurrentFamily


def _factor(name: str) -> Any:
    """The block's factor ``name`` (``attn_beta_factor`` ...), for a sublayer's envoy."""
    return lambda envoy: getattr(envoy.parent._module, name)


class MiniMaxLayer(RescaledLayer):
    """The block adds each sublayer to its norm of the stream times ``alpha``: ``alpha * norm(x) + beta * sublayer``."""

    def rescaled_input(self, stream: Tensor) -> Tensor:
        return self._module.attn_alpha_factor * self.attention_norm_output

    def rescaled_mid(self, stream: Tensor) -> Tensor:
        return self._module.mlp_alpha_factor * self.mlp_norm_output


class MiniMaxLightning(LightningAttention):
    attention_output = LightningAttention.attention_output.scaled(_factor("attn_beta_factor"))


class MiniMaxAttention(Attention):
    attention_output = Attention.attention_output.scaled(_factor("attn_beta_factor"))


class MiniMaxMoe(MixtralMoe):
    mlp_output = MixtralMoe.mlp_output.scaled(_factor("mlp_beta_factor"))


FAMILY = RecurrentFamily(
    name="minimax",
    model_types=("minimax",),
    modeling=(modeling.__name__,),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router", modeling.MiniMaxLightningAttention: "linear_attn"},
    envoys={
        **default.FAMILY.envoys,
        "layers.*": MiniMaxLayer,
        "layers.*.self_attn": MiniMaxAttention,
        "layers.*.mlp": MiniMaxMoe,
        modeling.MiniMaxLightningAttention: MiniMaxLightning,
    },
    # the lightning block in the middle: its decay rate shrinks with depth to almost none on the last layer, and a
    # softmax block first, where the model reads the cache's length (on a lightning block it reads 0, so a call over a
    # cache outside generate misplaces the softmax blocks' mask); blocks of 4 tokens, so a prompt's loop runs over several
    tiny={
        "minimax": TinyConfig(
            "minimax",
            {
                "num_hidden_layers": 3,
                "layer_types": ["full_attention", "linear_attention", "full_attention"],
                "block_size": 4,
                # factors other than one (the config's defaults), so a contribution or a rescaling read without its factor shows
                "full_attn_alpha_factor": 1.5,
                "full_attn_beta_factor": 0.7,
                "linear_attn_alpha_factor": 1.3,
                "linear_attn_beta_factor": 0.8,
                "mlp_alpha_factor": 1.2,
                "mlp_beta_factor": 0.9,
            },
        )
    },
    skips={"minimax": {"neurons_make_contribution": "a mixture of experts"}},
    half_precision_failures={
        "minimax": {
            "states_follow_the_scan": (
                "the blocks' loop (each block's products under a decay mask, the state carried between blocks) and the "
                "tokens' loop round in another order in bfloat16: their last states differ by five bfloat16 steps "
                "(0.039 on entries near 1), where in float32 they agree to 5e-7"
            ),
        },
    },
)
