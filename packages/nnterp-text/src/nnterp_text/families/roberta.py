"""RoBERTa: BERT's post-LN block under ``roberta``, its LM head (dense, GELU, LayerNorm, decoder) ``lm_head``."""

from . import bert


def position_ids(model, supplied):
    """RoBERTa numbers real tokens from ``padding_idx + 1``: nnsight's 0-based left-padding positions, shifted."""
    return supplied + model.text_config.pad_token_id + 1


FAMILY = bert.FAMILY.replace(
    name="roberta",
    model_types=("roberta",),
    rename=bert.rename("roberta", "lm_head"),
    position_ids=position_ids,
    tiny=bert.tiny_decoder("roberta"),
    skips={"roberta": bert.POST_LN_SKIPS},
)
