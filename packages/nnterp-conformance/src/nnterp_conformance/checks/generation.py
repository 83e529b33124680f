"""Generation: values read at each step of tracer.iter have that step's length, and the contribution holds at each."""

from __future__ import annotations

from typing import Any

import nnsight
import torch

from .base import Case, CheckFailure, Gaps, check, expect_close, input_shape, require
from .residual import CONTRIBUTION

STEPS = 3


@check("generation")
def contribution_at_every_step(model: Any, case: Case) -> str:
    """Under generate, each step's values have the step's length and the contribution identity holds."""
    blocks = require(model, *CONTRIBUTION)
    prompt = case.alone(0)
    with torch.no_grad(), model.generate(prompt.batch, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer:
        steps = nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            step = []
            for layer in blocks:
                block = model.layers[layer]
                values = (block.layer_input, block.self_attn.attention_output, block.mlp.mlp_output, block.layer_output)
                step.append([value.detach().clone() for value in values])
            steps.append(step)
    length = input_shape(model, prompt)[1]
    gaps = Gaps()
    for index, step in enumerate(steps):
        expected = length if index == 0 else 1
        for layer, (stream, attention, mlp, output) in zip(blocks, step):
            if output.shape[1] != expected:
                raise CheckFailure(f"step {index}, layers[{layer}]: {output.shape[1]} positions, expected {expected}")
            gaps.add(expect_close(f"step {index}, layers[{layer}]: the contribution identity", stream + attention + mlp, output))
    if len(steps) != STEPS:
        raise CheckFailure(f"read {len(steps)} steps of {STEPS}")
    return f"{STEPS} steps; {gaps}"
