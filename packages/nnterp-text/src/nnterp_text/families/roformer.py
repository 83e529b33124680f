"""RoFormer: BERT's post-LN block and head under ``roformer``, its attention's own arithmetic with rotary embeddings.

``attention.self`` rotates the queries and keys (``apply_rotary_position_embeddings``,
with the sinusoidal positions the encoder computes) before the first ``matmul``:
its operands are the rotated queries and keys, the ones the scores are made
from, so the interior is read where ``post_ln_own_attention`` reads it. With
``rotary_value`` the values are rotated too, and the second ``matmul``'s operand
is the rotated values the pattern weights. The embeddings carry no absolute
positions.
"""

from . import bert, post_ln_own_attention
from .post_ln_own_attention import TupleBertLayer

FAMILY = post_ln_own_attention.FAMILY.replace(
    name="roformer",
    model_types=("roformer",),
    rename=bert.rename("roformer", "cls.predictions"),
    # the block returns (hidden, (attentions)): the encoder reads [0]
    envoys={**post_ln_own_attention.FAMILY.envoys, "layers.*": TupleBertLayer},
    # embedding widths away from the hidden width, so the projections after the embeddings run
    tiny=bert.tiny_decoder("roformer", embedding_size=32),
    skips={"roformer": bert.POST_LN_SKIPS},
)
