"""Data2Vec text: RoBERTa's block and head under ``data2vec_text``."""

from .bert import *  # noqa: F403
from .bert import rename
from .roberta import position_ids  # noqa: F401 - RoBERTa's positions

RENAME = rename("data2vec_text", "lm_head")
