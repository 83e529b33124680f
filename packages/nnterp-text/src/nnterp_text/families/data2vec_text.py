"""Data2Vec text: RoBERTa's block and head under ``data2vec_text``."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("data2vec_text", "lm_head")
