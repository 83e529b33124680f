"""ERNIE: BERT's block and head under ``ernie`` (its task-type embeddings change only the stream entering the first block)."""

from . import bert

FAMILY = bert.FAMILY.replace(
    name="ernie",
    model_types=("ernie",),
    rename=bert.rename("ernie", "cls.predictions"),
    tiny=bert.tiny_decoder("ernie"),
    skips={"ernie": bert.POST_LN_SKIPS},
)
