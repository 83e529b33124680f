"""Batching: a row of a padded batch gives the same values at its real positions as its prompt alone."""

from __future__ import annotations

from nnterp.protocols import StandardModel
from nnterp.tolerances import BATCH_TOLERANCE, coarsest

from .base import Case, Gaps, Skip, check, expect_close, model_dtype, read, require


@check("batching")
def padded_rows_match_alone(model: StandardModel, case: Case) -> str:
    """Each row of a left-padded batch matches its prompt run alone, at every block's layer_output and the logits."""
    if len(case.prompts) < 2:
        raise Skip("needs a batch of at least two prompts")
    blocks = require(model, "layer_output")
    # a block whose own arithmetic sees the padding (a compressor pooling fixed windows of positions) says why
    reasons = sorted(
        {reason for layer in blocks if (reason := getattr(model.layers[layer], "padding_changes", lambda: None)())}
    )
    if reasons:
        raise Skip(f"the model's own arithmetic sees the padding: {'; '.join(reasons)}")
    plan: list[tuple[int | None, str]] = [(layer, "layer_output") for layer in blocks] + [(None, "logits")]
    batched = read(model, case, plan)
    gaps = Gaps()
    for row in range(len(case.prompts)):
        alone = read(model, case.alone(row), plan)
        length = alone[-1].shape[1]
        for (layer, name), together, single in zip(plan, batched, alone):
            where = "logits" if layer is None else f"layers[{layer}].{name}"
            gaps.add(
                expect_close(
                    f"row {row} of the batch against its prompt alone, {where}",
                    together[row : row + 1, -length:],
                    single,
                    table=BATCH_TOLERANCE,
                    dtype=coarsest(single, model_dtype(model)),
                )
            )
    return str(gaps)
