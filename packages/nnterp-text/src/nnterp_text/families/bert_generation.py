"""BertGeneration: BERT's block under ``bert``; its LM head is the decoder alone."""

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("bert", "lm_head")
