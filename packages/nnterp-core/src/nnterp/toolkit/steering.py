"""Interventions on the residual stream to call inside a trace: steering and skipping blocks.

Both edit ``layer_output``, the stream each block hands on, so they work on
every family. Call them inside ``with model.trace(...)`` (or
``model.generate``), before reading anything they change::

    with model.trace(prompts):
        steer(model, [4, 5], direction, factor=8.0, token_positions=[-1])
        probs = model.logits[:, -1].softmax(-1).save()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = ["steer", "skip_layers"]

Index = int | Sequence[int] | slice | Tensor | None


def _index(index: Index) -> slice | Tensor:
    if index is None:
        return slice(None)
    if isinstance(index, slice):
        return index
    if isinstance(index, int):
        return torch.tensor([index])
    return torch.as_tensor(index, dtype=torch.long).reshape(-1)


def _where(batch_index: Index, token_positions: Index) -> tuple:
    rows, positions = _index(batch_index), _index(token_positions)
    if isinstance(rows, Tensor) and isinstance(positions, Tensor):
        return rows[:, None], positions[None, :]  # every row with every position, not zipped
    return rows, positions


def steer(
    model: Any,
    layers: int | Sequence[int],
    vector: Tensor,
    factor: float = 1.0,
    *,
    token_positions: Index = None,
    batch_index: Index = None,
) -> None:
    """Add ``factor * vector`` to the residual stream leaving each of ``layers``; call it inside a trace.

    ``vector`` is ``[hidden_size]`` (or broadcastable to the selected
    ``[rows, positions, hidden_size]``). ``token_positions`` and
    ``batch_index`` (an int, a list, a slice or a tensor; None for all) pick
    the positions of the (left-padded) sequence axis and the batch rows:
    every chosen row at every chosen position is steered, nothing else. The
    edit is in place on ``layers[l].layer_output``, so the next block, and
    any later read of it, sees the steered stream. Layers are visited in
    forward order, whatever order they are given in, each once.
    """
    layers = sorted({layer % model.num_layers for layer in ([layers] if isinstance(layers, int) else layers)})
    where = _where(batch_index, token_positions)
    for layer in layers:
        hidden = model.layers[layer].layer_output
        hidden[where] += (factor * vector).to(device=hidden.device, dtype=hidden.dtype)


def skip_layers(model: Any, start: int, end: int, with_: Tensor | None = None) -> None:
    """Skip blocks ``start`` to ``end`` (inclusive): none of them runs; call it inside a trace.

    With ``with_=None`` each skipped block hands on its own input, so the
    stream entering ``start`` (its ``layer_input``) arrives unchanged at
    ``end + 1`` (or at the final norm when ``end`` is the last block). With a
    tensor ``[batch, seq, hidden_size]``, every skipped block hands on
    ``with_``, which is what ``end + 1`` receives. Call it before reading
    anything inside the skipped blocks, which then do not exist for this run.
    """
    start, end = start % model.num_layers, end % model.num_layers
    if end < start:
        raise ValueError(f"skip_layers: end ({end}) comes before start ({start})")
    hidden = model.layers[start].layer_input if with_ is None else with_
    for layer in range(start, end + 1):
        model.layers[layer].skip(hidden)
