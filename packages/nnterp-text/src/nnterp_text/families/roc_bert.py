"""RoCBERT: BERT's block and head under ``roc_bert`` (its pronunciation and shape embeddings change only the stream entering the first block)."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("roc_bert", "cls.predictions")
