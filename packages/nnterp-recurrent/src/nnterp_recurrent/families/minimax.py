"""MiniMax (MiniMax-Text-01): lightning attention blocks (``linear_attn``) and softmax attention blocks, each with Mixtral's mixture.

The block keeps no stream of its own: it carries on from its input's
norm, ``h = alpha * input_layernorm(x) + beta * mixer(input_layernorm(x))``,
then ``alpha' * post_attention_layernorm(h) + beta' * mlp(post_attention_layernorm(h))``
(the factors from the config, per kind of block). So what a sublayer changes
in the stream includes a norm and is no tensor of the model: the
contributions are unavailable, and the streams, the norms' outputs, the
mixers' interiors and the mixture are served. Both mixers are ``self_attn``
natively; the lightning blocks' is aliased ``linear_attn`` by its class.
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import Attention, MixtralMoe, unavailable
from nnterp.families import default
from nnterp.tiny import TinyConfig
from transformers.models.minimax import modeling_minimax as modeling

from ..components.lightning import LightningAttention
from ..family import RecurrentFamily

NORMED_RESIDUAL = (
    "MiniMax's block adds the {sublayer} to its input's norm, not to its input ({stream} = {alpha} * {norm}.output + "
    "{beta} * output, the factors from the config): what the {sublayer} changes in the stream includes the norm and "
    "is no tensor of the model; the {sublayer}'s own output is {native}"
)
ATTENTION = dict(sublayer="attention", stream="layer_mid", norm="input_layernorm", native="self_attn.output[0]")


class MiniMaxLightning(LightningAttention):
    attention_output = unavailable(
        NORMED_RESIDUAL.format(alpha="linear_attn_alpha_factor", beta="linear_attn_beta_factor", **ATTENTION)
    )


class MiniMaxAttention(Attention):
    attention_output = unavailable(
        NORMED_RESIDUAL.format(alpha="full_attn_alpha_factor", beta="full_attn_beta_factor", **ATTENTION)
    )


class MiniMaxMoe(MixtralMoe):
    mlp_output = unavailable(
        NORMED_RESIDUAL.format(
            sublayer="MLP", stream="layer_output", norm="post_attention_layernorm", alpha="mlp_alpha_factor",
            beta="mlp_beta_factor", native="mlp.output",
        )
    )


SKIPS = dict.fromkeys(
    ("contribution", "contribution_at_every_step", "mid_stream"),
    "MiniMax's block adds the attention to its input's norm, not to its input",
)

FAMILY = RecurrentFamily(
    name="minimax",
    model_types=("minimax",),
    modeling=(modeling.__name__,),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router", modeling.MiniMaxLightningAttention: "linear_attn"},
    envoys={
        **default.FAMILY.envoys,
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
            {"num_hidden_layers": 3, "layer_types": ["full_attention", "linear_attention", "full_attention"], "block_size": 4},
        )
    },
    skips={"minimax": {**SKIPS, "neurons_make_contribution": "a mixture of experts"}},
)
