"""CamemBERT: RoBERTa's block and head, under the same names."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("roberta", "lm_head")
