"""GPT (openai-gpt): a post-LN block whose attention does its arithmetic in its own ``_attn``, and no final norm.

``layer_mid = ln_1(layer_input + attention)`` and ``layer_output = ln_2(layer_mid
+ mlp)``: the block normalizes the stream itself after each sublayer is added,
so what a sublayer changes in the stream includes that normalization and is
no tensor of the model. The contributions are unavailable; the streams
(``layer_input``, ``layer_mid``, ``layer_output``) and the sublayers' interiors
are served. The last block's ``ln_2`` is the last norm, so the logits are
``lm_head(layer_output)``. The keys reach ``_attn`` transposed, ``[batch, heads,
head_dim, seq]``, and are served in the standard layout. Every block shares one
activation module (``ACT_FNS`` holds instances), so the activation is read
where ``c_proj`` receives it, not at the module.
"""

from typing import Any

from nnterp import Attention, Family, Mlp, PostNormLayer, TinyConfig, unavailable

from torch import Tensor

from .own_attention import HELPER, HelperAttention, viewed

POST_LN = (
    "a post-LN block: it normalizes the stream after adding the {sublayer}'s output ({stream} = "
    "{norm}({residual} + output)), so what the {sublayer} changes in the stream includes that norm and "
    "is no tensor of the model; the {sublayer}'s own output is {native}"
)

#: what a post-LN block makes the kit skip: no additive decomposition of the stream, so no contribution to check
POST_LN_SKIPS = {
    **dict.fromkeys(
        ("contribution", "contribution_at_every_step", "mid_stream", "toolkit_groups_sum_to_the_stream"),
        "a post-LN block",
    ),
    # the norms follow the sublayers: nothing is called with a norm's output
    "norm_outputs_feed_the_sublayers": "a post-norm block",
}


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """``lm_head`` alone: the stream leaving the last block is already normalized by its ``ln_2``."""
    return model.lm_head(hidden)


def _keys_last(envoy: Any, value: Tensor) -> Tensor:
    return value.transpose(-1, -2)


class PostLNLayer(PostNormLayer):
    """A post-LN block: returns ``[hidden, (attentions)]``; the MLP reads the mid stream, ``ln_1``'s output."""

    returns_tuple = True


class GPTAttention(HelperAttention):
    attention_output = unavailable(
        POST_LN.format(
            sublayer="attention", stream="layer_mid", norm="ln_1", residual="layer_input", native="self_attn.output[0]"
        )
    )
    attention_keys = viewed(Attention.attention_keys, f"{HELPER}.inputs", _keys_last, _keys_last, select=1)


class GPTMlp(Mlp):
    mlp_output = unavailable(
        POST_LN.format(sublayer="MLP", stream="layer_output", norm="ln_2", residual="layer_mid", native="mlp.output")
    )
    # c_proj's input is act(c_fc(x)): the activation's output on this plain MLP
    mlp_activation = Mlp.mlp_activation.at("down_proj.input")


FAMILY = Family(
    name="openai_gpt",
    model_types=("openai-gpt",),
    rename={
        "transformer.h": "layers",
        "transformer.tokens_embed": "embed_tokens",
        "attn": "self_attn",
        "attn.c_proj": "attn.o_proj",
        "mlp.c_fc": "mlp.up_proj",
        "mlp.c_proj": "mlp.down_proj",
    },
    envoys={"layers.*": PostLNLayer, "layers.*.self_attn": GPTAttention, "layers.*.mlp": GPTMlp},
    no_final_norm="a post-LN model: the last block's ln_2 normalizes the stream the logits are read from; there is no final norm",
    project_on_vocab=project_on_vocab,
    tiny={"openai-gpt": TinyConfig("openai-gpt")},
    skips={"openai-gpt": POST_LN_SKIPS},
)
