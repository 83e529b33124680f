"""RoCBERT: BERT's block and head under ``roc_bert`` (its pronunciation and shape embeddings change only the stream entering the first block)."""

from . import bert

FAMILY = bert.FAMILY.replace(
    name="roc_bert",
    model_types=("roc_bert",),
    rename=bert.rename("roc_bert", "cls.predictions"),
    tiny=bert.tiny_decoder("roc_bert"),
    skips={"roc_bert": bert.POST_LN_SKIPS},
)
