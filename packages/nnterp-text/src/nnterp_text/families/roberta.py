"""RoBERTa: BERT's post-LN block under ``roberta``, its LM head (dense, GELU, LayerNorm, decoder) ``lm_head``."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("roberta", "lm_head")


def position_ids(model, supplied):
    """RoBERTa numbers real tokens from ``padding_idx + 1``: nnsight's 0-based left-padding positions, shifted."""
    return supplied + model.text_config.pad_token_id + 1
