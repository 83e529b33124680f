"""Attention with a learned sink logit per head: softmax over the real keys and one more column that attends to nothing.

Two ways of computing it exist. GPT-OSS and Flint join the sink as a last
column of the softmax's input and cut it off the output (``SinkAttention``):
the pattern is over the real keys and its rows sum to less than one. Granite
SWA takes the plain softmax over the real keys and scales each head's output
by ``sigmoid(logsumexp(scores) - sink)`` afterwards (``ScaledSinkAttention``):
the pattern the values are mixed with sums to one, the sink acting after it.
"""

from typing import Any

from nnterp import Attention, EProperty, HeadOutputs, interface_reason, seq_first
from nnterp.components.attention import INTERFACE

from torch import Tensor


def interior(operation: str) -> str:
    """The key of an operation inside the shared interface's call: ``interior("F_softmax_0.input")``."""
    return f"source.{INTERFACE}.source.{operation}"


class SinkAttention(Attention):
    """The sink joins the softmax as its last column and is dropped after: scores are the masked scores before it joins.

    ``attention_scores`` is ``attn_weights_1`` (``scores * scaling + mask``,
    the binding that exists whenever a mask is passed, as on every prompt),
    so it shares the pattern's key axis; the pattern is
    ``softmax(cat([scores, sink_logits]))[..., :-1]``.
    """

    sink_column = True

    attention_scores = Attention.attention_scores.at(interior("attn_weights_1.output"))

    @property
    def sink_logits(self) -> Any:
        """The sink logit of each head, ``[num_heads]``: the last column the softmax saw on every row."""
        return self._module.sinks


class ScaledSinkAttention(Attention):
    """The softmax is over the real keys; the sink scales each head's output after the values are mixed.

    The interface calls ``F.softmax`` and ``F.dropout`` rather than
    ``nn.functional``'s: the scores are the softmax's input, the pattern the
    dropout's output (rows sum to one); ``attention_head_outputs`` is what the
    interface returns, ``(pattern @ values) * sigmoid(logsumexp(scores) - sink)``.
    """

    attention_scores = Attention.attention_scores.at(interior("F_softmax_0.input"))
    attention_probabilities = Attention.attention_probabilities.at(interior("F_dropout_0.output"))

    @EProperty(interior("torch_matmul_1.output"), "Each head's output before the sink scales it", interface_reason)
    def ungated_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Each head's output before the sink scales it, ``[batch, seq, num_heads, head_dim]``: the pattern against the values."""
        return seq_first(value)

    @ungated_head_outputs.postprocess
    def ungated_head_outputs(self, value: Tensor) -> Tensor:
        # an assignment is laid back out heads first, as the matmul returned it
        return seq_first(value)

    @ungated_head_outputs.transform
    def ungated_head_outputs(self, view: Tensor, served: Tensor) -> Tensor:
        # the view laid back out heads first is what the interface goes on with: the same storage (an in-place edit
        # lands either way), and the sink's scaling now computes from the served view, so a backward reaches it
        return seq_first(view)

    mixed_heads = ungated_head_outputs.name

    @property
    def sink_logits(self) -> Any:
        """The sink logit of each head, ``[num_heads]``, that scales its output by ``sigmoid(logsumexp(scores) - sink)``."""
        return self._module.sinks
