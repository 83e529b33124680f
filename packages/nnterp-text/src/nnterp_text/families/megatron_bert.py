"""Megatron-BERT: the pre-LN BERT block under ``bert``, its own attention arithmetic, BERT's head.

The attention's pre-norm is ``attention.ln``, the MLP's the block's ``ln``; the
final LayerNorm is ``bert.encoder.ln``, applied before ``cls.predictions``.

``attention.self`` does its own arithmetic rather than calling the shared
interface: ``scores = matmul(q, k.transpose(-1, -2)) / sqrt(d) + mask``,
``probs = dropout(softmax(scores))``, ``context = matmul(probs, v)``. The
interior is read at those operations: the queries are the first operand of the
first ``matmul`` and the keys what its second operand transposes (both after the
cache), the values the second operand of the second ``matmul``, the scores the
softmax's input, the pattern the dropout's output (the tensor multiplied with
the values) and the head outputs the second ``matmul``'s output, held heads
first and served sequence first.
"""

from typing import Any

from nnterp import Attention, Layer, seq_first

from torch import Tensor

from . import bert, pre_ln_bert
from .own_attention import viewed
from .pre_ln_bert import PreLNBertAttention, PreLNBertLayer


class MegatronBertLayer(PreLNBertLayer):
    """Returns ``(hidden, (attentions))``; the MLP's pre-norm is the block's ``ln``."""

    returns_tuple = True
    attention_norm_output = Layer.attention_norm_output.at("self_attn.ln.output")
    layer_mid = Layer.layer_mid.at("ln.input")
    mlp_norm_output = Layer.mlp_norm_output.at("ln.output")


#: the forward of ``attention.self``, where the interior is computed
SELF = "self.source"


def _seq_first(envoy: Any, value: Tensor) -> Tensor:
    return seq_first(value)


def _keys_last(envoy: Any, value: Tensor) -> Tensor:
    return value.transpose(-1, -2)


class MegatronBertAttention(PreLNBertAttention):
    attention_queries = Attention.attention_queries.at(f"{SELF}.torch_matmul_0.inputs", select=0)
    attention_keys = viewed(
        Attention.attention_keys, f"{SELF}.key_layer_transpose_0.output", _keys_last, _keys_last, select=None
    )
    attention_values = Attention.attention_values.at(f"{SELF}.torch_matmul_1.inputs", select=1)
    attention_scores = Attention.attention_scores.at(f"{SELF}.nn_functional_softmax_0.input")
    attention_probabilities = Attention.attention_probabilities.at(f"{SELF}.self_dropout_0.output")
    attention_head_outputs = viewed(
        Attention.attention_head_outputs, f"{SELF}.torch_matmul_1.output", _seq_first, _seq_first, select=None
    )


FAMILY = pre_ln_bert.FAMILY.replace(
    name="megatron_bert",
    model_types=("megatron-bert",),
    rename=pre_ln_bert.rename("bert", "cls.predictions", "bert.encoder.ln"),
    envoys={**pre_ln_bert.FAMILY.envoys, "layers.*": MegatronBertLayer, "layers.*.self_attn": MegatronBertAttention},
    # eps 1e-5, not the class default 1e-12: with that the final LayerNorm undoes a scaled last-block output
    # exactly in float32, so an edit there would reach nothing
    tiny=bert.tiny_decoder("megatron-bert", layer_norm_eps=1e-5),
)
