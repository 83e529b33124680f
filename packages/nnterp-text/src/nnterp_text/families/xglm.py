"""XGLM: the default block with its feed-forward inline, and an attention computing over ``[batch * heads, ...]``."""

from typing import Any

from nnterp import Attention, Family, Mlp, TinyConfig, seq_first

from torch import Tensor, float16

from .inline_mlp import InlineMlp, InlineMlpLayer
from .own_attention import viewed

#: what the block adds after each sublayer, the output of a dropout (_1 is the cross-attention's, _2 the activation's)
ADDED_BY_ATTENTION = "../source.nn_functional_dropout_0.output"
ADDED_BY_MLP = "../source.nn_functional_dropout_3.output"


def _split_heads(attention: Any, value: Tensor) -> Tensor:
    return value.view(-1, attention.num_heads, *value.shape[1:])


def _join_heads(attention: Any, value: Tensor) -> Tensor:
    return value.reshape(-1, *value.shape[2:])


def _heads_of_projection(attention: Any, value: Tensor) -> Tensor:
    return seq_first(value.unflatten(-1, (attention.num_heads, -1)))


def _projection_of_heads(attention: Any, value: Tensor) -> Tensor:
    return seq_first(value).flatten(2)


#: held as [batch * heads, ...], served as [batch, heads, ...]
FLAT_HEADS = (_split_heads, _join_heads)
#: held as a projection's [batch, seq, heads * head_dim], served as [batch, heads, seq, head_dim]
PROJECTED_HEADS = (_heads_of_projection, _projection_of_heads)


def _output_of(operation: str) -> str:
    return f"source.{operation}.output"


def _softmax_input(attention: Any) -> str:
    # the forward upcasts a float16 softmax in a branch of its own
    branch = 0 if attention._module.q_proj.weight.dtype == float16 else 1
    return f"source.nn_functional_softmax_{branch}.input"


class XGLMAttention(Attention):
    """XGLM's attention holds its interior as ``[batch * heads, ...]``: each value is served as a view split by head.

    XGLM scales its queries by ``head_dim ** -0.5`` as soon as they are
    projected; the queries served are the projection's, before that scale, as
    on the families that scale the scores instead. Since they are read inside
    the forward before the operations the other values are, the forward is
    instrumented when the envoy is built.
    """

    sourced = True

    attention_queries = viewed(Attention.attention_queries, "q_proj.output", *PROJECTED_HEADS, select=None)
    attention_keys = viewed(Attention.attention_keys, _output_of("key_states_reshape_0"), *FLAT_HEADS, select=None)
    attention_values = viewed(
        Attention.attention_values, _output_of("value_states_reshape_0"), *FLAT_HEADS, select=None
    )
    attention_scores = viewed(Attention.attention_scores, _softmax_input, *FLAT_HEADS)
    # the softmax's output, through a dropout
    attention_probabilities = viewed(
        Attention.attention_probabilities, _output_of("nn_functional_dropout_0"), *FLAT_HEADS
    )
    # already [batch, seq, heads, head_dim]: the transpose before the heads are joined
    attention_head_outputs = Attention.attention_head_outputs.at(_output_of("attn_output_transpose_0"), select=None)
    attention_output = Attention.attention_output.at(ADDED_BY_ATTENTION, select=None)


class XGLMMlp(InlineMlp):
    """XGLM's inline feed-forward: its contribution is what the block adds after ``fc2``."""

    mlp_output = Mlp.mlp_output.at(ADDED_BY_MLP, select=None)


FAMILY = Family(
    name="xglm",
    model_types=("xglm",),
    rename={
        "model.layers": "layers",
        "model.embed_tokens": "embed_tokens",
        "model.layer_norm": "norm",
        "self_attn.out_proj": "self_attn.o_proj",
        "self_attn_layer_norm": "input_layernorm",
        "final_layer_norm": "post_attention_layernorm",
    },
    envoys={"layers.*": InlineMlpLayer, "layers.*.self_attn": XGLMAttention, "layers.*.mlp": XGLMMlp},
    tiny={"xglm": TinyConfig("xglm", {"num_layers": 3, "attention_heads": 4})},
)
