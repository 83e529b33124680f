"""ERNIE: BERT's block and head under ``ernie`` (its task-type embeddings change only the stream entering the first block)."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("ernie", "cls.predictions")
