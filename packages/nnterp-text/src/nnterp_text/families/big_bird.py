"""BigBird with ``attention_type="original_full"``: BERT's post-LN block and head under ``bert``, full attention of its own arithmetic.

With full attention ``attention.self`` is ``BigBirdSelfAttention``, whose
arithmetic is Megatron-BERT's: the interior is read where
``post_ln_own_attention`` reads it. The block returns its stream bare, as
BERT's does. The block-sparse attention (the config's default,
``BigBirdBlockSparseAttention``) computes its pattern in pieces in a helper
(first, second, band, second-to-last and last query blocks, each with its own
softmax over different keys) and ignores the causal mask: it holds no one
scores or pattern tensor, so on a block-sparse load the interior is
unavailable, with that reason. The tiny checkpoint sets
``attention_type="original_full"``.
"""

from typing import Any

from nnterp import each_interior

from . import bert, post_ln_own_attention
from .post_ln_own_attention import OwnArithmeticBertAttention

BLOCK_SPARSE = (
    'attention_type="block_sparse": BigBirdBlockSparseAttention computes the pattern in pieces inside its '
    "bigbird_block_sparse_attention helper (first, second, band, second-to-last and last query blocks, each its own "
    "matmul and softmax over different keys, the causal mask unused), so no one tensor is the scores, the pattern or "
    "the head outputs; and BigBirdModel pads the sequence to a multiple of block_size, or on a short one swaps "
    'attention.self for a full-attention module during the forward; load with attention_type="original_full" to read '
    "the interior"
)


def _block_sparse(envoy: Any) -> str | None:
    return None if envoy._module.attention_type == "original_full" else BLOCK_SPARSE


def _full_only(value: Any) -> Any:
    return value.at(unavailable=_block_sparse)


@each_interior(_full_only)
class BigBirdAttention(OwnArithmeticBertAttention):
    """BigBird's attention: the interior of the full-attention path, unavailable under block-sparse attention."""


FAMILY = post_ln_own_attention.FAMILY.replace(
    name="big_bird",
    model_types=("big_bird",),
    rename=bert.rename("bert", "cls.predictions"),
    envoys={**post_ln_own_attention.FAMILY.envoys, "layers.*.self_attn": BigBirdAttention},
    # full attention: the block-sparse default builds its pattern in pieces (its values say so when loaded that way)
    tiny=bert.tiny_decoder("big_bird", attention_type="original_full"),
    skips={"big_bird": bert.POST_LN_SKIPS},
)
