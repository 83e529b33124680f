"""ELECTRA's generator: BERT's block under ``electra``; its head is ``generator_predictions`` (dense, GELU, LayerNorm) then ``generator_lm_head``."""

from typing import Any

from torch import Tensor

from .bert import *  # noqa: F403
from .bert import rename

RENAME = rename("electra", "generator_lm_head")


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The generator's prediction transform, then ``lm_head``: the head reads the last block's output directly."""
    return model.lm_head(model.generator_predictions(hidden))
