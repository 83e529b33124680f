"""Attention that does its own arithmetic instead of calling transformers' shared interface.

GPT-Neo, GPT-NeoX-Japanese and OpenAI GPT compute their attention in a
method of their own, ``attn_output, attn_weights = self._attn(query, key,
value, attention_mask)``: ``HelperAttention`` reads the interior there.
``viewed`` moves a value to a tensor the model holds in another layout, such
as XGLM's ``[batch * heads, seq, head_dim]``.
"""

from collections.abc import Callable
from typing import Any

from nnterp import Attention, EProperty, seq_first

#: the call of the attention's own helper in its forward
HELPER = "source.self__attn_0"


def inside_helper(path: str) -> str:
    """The key of an operation inside ``self._attn``: ``inside_helper("nn_functional_softmax_0.input")``."""
    return f"{HELPER}.source.{path}"


def viewed(
    value: EProperty,
    key: str | Callable[[Any], str],
    to_standard: Callable[[Any, Any], Any],
    to_model: Callable[[Any, Any], Any],
    **changes: Any,
) -> EProperty:
    """``value`` read at ``key``, where the model holds it in another layout.

    ``to_standard(envoy, tensor)`` gives the standard layout as a view of what
    the model holds and ``to_model(envoy, tensor)`` maps it back: an in-place
    edit is written back through it, and so is an assigned tensor. The
    meaning, docstring and layout stay ``value``'s.
    """
    return value.evolve(
        key=key, read=to_standard, write=to_model, write_back=lambda envoy, view, held: to_model(envoy, view), **changes
    )


def _swap_seq_and_heads(envoy: Any, value: Any) -> Any:
    return seq_first(value)


class HelperAttention(Attention):
    """Attention computed in ``self._attn(query, key, value, attention_mask)``: the interior is read around that call.

    Its first three arguments are the queries, keys and values (after the
    rotary embedding and the cache, ``[batch, heads, seq, head_dim]``); its
    softmax's input the scores; the pattern is the last tensor bound before it
    is multiplied with the values; its first output the head outputs, held
    heads first and served sequence first.
    """

    attention_queries = Attention.attention_queries.at(f"{HELPER}.inputs", select=0)
    attention_keys = Attention.attention_keys.at(f"{HELPER}.inputs", select=1)
    attention_values = Attention.attention_values.at(f"{HELPER}.inputs", select=2)
    attention_scores = Attention.attention_scores.at(inside_helper("nn_functional_softmax_0.input"))
    # softmax, cast to the values' dtype, then the dropout module
    attention_probabilities = Attention.attention_probabilities.at(inside_helper("self_attn_dropout_0.output"))
    attention_head_outputs = viewed(
        Attention.attention_head_outputs, f"{HELPER}.output", _swap_seq_and_heads, _swap_seq_and_heads
    )
