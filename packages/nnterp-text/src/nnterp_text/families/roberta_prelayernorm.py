"""RoBERTa-PreLayerNorm: the pre-LN BERT block under ``roberta_prelayernorm``, RoBERTa's embeddings and head.

The attention's pre-norm is ``attention.LayerNorm``, the MLP's ``intermediate.LayerNorm``
(inside the ``mlp``, which is called with the mid stream); the final LayerNorm is
the backbone's ``LayerNorm``, applied to the last block's output before ``lm_head``.
"""

from .pre_ln_bert import *  # noqa: F403
from .pre_ln_bert import rename
from .roberta import position_ids  # noqa: F401 - RoBERTa's positions

RENAME = rename("roberta_prelayernorm", "lm_head", "roberta_prelayernorm.LayerNorm")
