"""Generation: values read at each step of tracer.iter have that step's length, and the contribution holds at each."""

from __future__ import annotations

import nnsight
from nnterp.identities import CONTRIBUTION, stream_sum
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import Case, CheckFailure, Gaps, check, expect_holds, get, input_shape, single_stream
from .residual import contribution_blocks

STEPS = 3


@check("generation", applies=single_stream)
def contribution_at_every_step(model: StandardModel, case: Case) -> str:
    """Under generate, each step's values have the step's length and the contribution identity holds."""
    blocks = contribution_blocks(model)
    prompt = case.alone(0)
    with (
        torch.no_grad(),
        model.generate(prompt.batch, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer,
    ):
        steps = nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            step = []
            for layer, terms in blocks.items():
                block = model.layers[layer]
                values = (block.layer_input, *(get(block, name) for name in terms), block.layer_output)
                step.append([value.detach().clone() for value in values])
            steps.append(step)
    length = input_shape(model, prompt)[1]
    gaps = Gaps()
    for index, step in enumerate(steps):
        expected = length if index == 0 else 1
        for layer, (stream, *terms, output) in zip(blocks, step):
            if output.shape[1] != expected:
                raise CheckFailure(f"step {index}, layers[{layer}]: {output.shape[1]} positions, expected {expected}")
            what = f"step {index}, layers[{layer}]: the contribution identity"
            gaps.add(
                expect_holds(
                    CONTRIBUTION,
                    what,
                    output.float(),
                    stream_sum(stream, terms),
                    dtype=coarsest(stream, *terms, output),
                )
            )
    if len(steps) != STEPS:
        raise CheckFailure(f"read {len(steps)} steps of {STEPS}")
    return f"{STEPS} steps; {gaps}"
