"""ELECTRA's generator: BERT's block under ``electra``; its head is ``generator_predictions`` (dense, GELU, LayerNorm) then ``generator_lm_head``."""

from typing import Any

from torch import Tensor

from . import bert


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The generator's prediction transform, then ``lm_head``: the head reads the last block's output directly."""
    return model.lm_head(model.generator_predictions(hidden))


FAMILY = bert.FAMILY.replace(
    name="electra",
    model_types=("electra",),
    rename=bert.rename("electra", "generator_lm_head"),
    project_on_vocab=project_on_vocab,
    tiny=bert.tiny_decoder("electra"),
    skips={"electra": bert.POST_LN_SKIPS},
)
