"""BERT's post-LN block whose ``attention.self`` does its own arithmetic (RoFormer, RemBERT, BigBird with full attention).

The block, streams, MLP and head are BERT's (``bert``): the contributions are
unavailable for the same reason. ``attention.self`` computes ``scores =
matmul(q, k.transpose(-1, -2)) / sqrt(d) + mask``, ``probs =
dropout(softmax(scores))``, ``context = matmul(probs, v)`` itself, as
Megatron-BERT's does: the interior is read at those operations, as
``megatron_bert`` reads it (queries the first ``matmul``'s first operand, keys
what its second operand transposes, values the second ``matmul``'s second
operand, scores the softmax's input, the pattern the dropout's output, head
outputs the second ``matmul``'s output), only without its pre-norms.
"""

from . import bert
from .bert import BertAttention, BertLayer
from .megatron_bert import MegatronBertAttention

#: Megatron-BERT's reading of the interior, copied (``.at()``) onto the post-LN attention
_OWN = MegatronBertAttention


class OwnArithmeticBertAttention(BertAttention):
    """BERT's post-LN attention (its output unavailable), its interior read at ``attention.self``'s own operations."""

    attention_queries = _OWN.attention_queries.at()
    attention_keys = _OWN.attention_keys.at()
    attention_values = _OWN.attention_values.at()
    attention_scores = _OWN.attention_scores.at()
    attention_probabilities = _OWN.attention_probabilities.at()
    attention_head_outputs = _OWN.attention_head_outputs.at()


class TupleBertLayer(BertLayer):
    """BERT's post-LN block as the older copies write it: it returns ``(hidden, (attentions))``, the encoder reading ``[0]``."""

    returns_tuple = True


#: the base of the copies (each serves its own model type): BERT's, its attention's interior read at its own operations
FAMILY = bert.FAMILY.replace(
    name="post_ln_own_attention", envoys={**bert.FAMILY.envoys, "layers.*.self_attn": OwnArithmeticBertAttention}
)
