"""Data2Vec text: RoBERTa's block and head under ``data2vec_text``."""

from . import bert, roberta

FAMILY = roberta.FAMILY.replace(
    name="data2vec_text",
    model_types=("data2vec-text",),
    rename=bert.rename("data2vec_text", "lm_head"),
    tiny=bert.tiny_decoder("data2vec-text"),
    skips={"data2vec-text": bert.POST_LN_SKIPS},
)
