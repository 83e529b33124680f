"""RoFormer: BERT's post-LN block and head under ``roformer``, its attention's own arithmetic with rotary embeddings.

``attention.self`` rotates the queries and keys (``apply_rotary_position_embeddings``,
with the sinusoidal positions the encoder computes) before the first ``matmul``:
its operands are the rotated queries and keys, the ones the scores are made
from, so the interior is read where ``post_ln_own_attention`` reads it. With
``rotary_value`` the values are rotated too, and the second ``matmul``'s operand
is the rotated values the pattern weights. The embeddings carry no absolute
positions.
"""

from .post_ln_own_attention import *  # noqa: F403
from .post_ln_own_attention import TUPLE_ENVOYS, rename

RENAME = rename("roformer", "cls.predictions")
# the block returns (hidden, (attentions)): the encoder reads [0]
ENVOYS = TUPLE_ENVOYS
