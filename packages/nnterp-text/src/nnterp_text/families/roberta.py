"""RoBERTa: BERT's post-LN block under ``roberta``, its LM head (dense, GELU, LayerNorm, decoder) ``lm_head``."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("roberta", "lm_head")
