"""XLM-RoBERTa: RoBERTa's block and head, under the same names."""

from .bert import *  # noqa: F403
from .bert import rename
from .roberta import position_ids  # noqa: F401 - RoBERTa's positions

RENAME = rename("roberta", "lm_head")
