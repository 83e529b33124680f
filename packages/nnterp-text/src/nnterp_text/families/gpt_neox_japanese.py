"""GPT-NeoX-Japanese: the default block, adding each sublayer through ``bias_dropout_add``, with its own ``_attn``."""

from nnterp import Family, Layer, Mlp, TinyConfig

from .own_attention import HelperAttention, inside_helper


def added(call: int) -> str:
    """What the ``call``-th ``bias_dropout_add(x, bias, residual)`` adds to the residual: ``dropout(x + bias)``."""
    return f"../source.bias_dropout_add_{call}.source.torch_nn_functional_dropout_0.output"


class NeoXJapaneseLayer(Layer):
    """The block returns ``(hidden_states, attn_weights)``, and its contributions are read in its running forward."""

    returns_tuple = True
    sourced = True


class NeoXJapaneseAttention(HelperAttention):
    """The last block's attention returns its output bias apart for the block to add: the contribution includes it.

    ``_attn`` applies its dropout before the cast to the values' dtype, so the
    pattern is the cast's output.
    """

    attention_output = HelperAttention.attention_output.at(added(0), select=None)
    attention_probabilities = HelperAttention.attention_probabilities.at(inside_helper("attn_weights_to_0.output"))


class NeoXJapaneseMlp(Mlp):
    """The MLP's contribution is what the block's second ``bias_dropout_add`` adds."""

    mlp_output = Mlp.mlp_output.at(added(1), select=None)


FAMILY = Family(
    name="gpt_neox_japanese",
    model_types=("gpt_neox_japanese",),
    rename={
        "gpt_neox_japanese.layers": "layers",
        "gpt_neox_japanese.embed_in": "embed_tokens",
        "gpt_neox_japanese.final_layer_norm": "norm",
        "embed_out": "lm_head",
        "attention": "self_attn",
        "attention.dense": "attention.o_proj",
        "mlp.dense_h_to_4h": "mlp.up_proj",
        "mlp.dense_4h_to_h": "mlp.down_proj",
        "mlp.act": "mlp.act_fn",
    },
    envoys={
        "layers.*": NeoXJapaneseLayer,
        "layers.*.self_attn": NeoXJapaneseAttention,
        "layers.*.mlp": NeoXJapaneseMlp,
    },
    tiny={
        "gpt_neox_japanese": TinyConfig("gpt_neox_japanese", {"num_hidden_layers": 3, "intermediate_multiple_size": 2})
    },
)
