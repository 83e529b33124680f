"""Interventions on the residual stream to call inside a trace: steering and skipping blocks.

Both edit ``layer_output``, the stream each block hands on, so they work on
every family. Call them inside ``with model.trace(...)`` (or
``model.generate``), before reading anything they change::

    with model.trace(prompts):
        steer(model, [4, 5], direction, factor=8.0, token_positions=[-1])
        probs = model.logits[:, -1].softmax(-1).save()

An edit acts on the forward it is bound to: inside ``model.generate`` that is
the prompt's pass alone, unless it is called in ``for step in tracer.all():``
(or ``tracer.iter[...]``), once per step. ``generate_steered`` steers every
generated step for you.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import nnsight

import torch
from torch import Tensor

from ..protocols import StandardModel
from . import _arguments

__all__ = ["generate_steered", "skip_layers", "steer"]

Index = int | Sequence[int] | slice | Tensor | None


def _where(hidden: Tensor, batch_index: Index, token_positions: Index, function: str) -> tuple:
    """The rows and positions of ``hidden`` (``[batch, seq, ...]``) to edit, checked against its sizes: every row with every position."""
    rows = (
        slice(None)
        if batch_index is None
        else torch.tensor(
            _arguments.indices(
                batch_index, hidden.shape[0], function=function, argument="batch_index", what="batch rows"
            )
        )
    )
    positions = (
        slice(None)
        if token_positions is None
        else torch.tensor(
            _arguments.positions(token_positions, hidden.shape[1], function=function, argument="token_positions")
        )
    )
    if isinstance(rows, Tensor) and isinstance(positions, Tensor):
        return rows[:, None], positions[None, :]  # every row with every position, not zipped
    return rows, positions


def steer(
    model: StandardModel,
    layers: int | Sequence[int],
    vector: Tensor,
    factor: float = 1.0,
    *,
    token_positions: Index = None,
    batch_index: Index = None,
) -> None:
    """Add ``factor * vector`` to the residual stream leaving each of ``layers``; call it inside a trace.

    ``vector`` is ``[hidden_size]`` (or broadcastable to the selected
    ``[rows, positions, hidden_size]``). ``layers`` count from the end when
    negative; one outside the model is refused, as is a vector of another
    width. ``token_positions`` and ``batch_index`` (an int, a list, a slice or
    a tensor; None for all) pick positions of the trace's left-padded batch
    (a negative one counts back from every prompt's last token, ``-1`` being
    each prompt's last; a non-negative one from the batch's first column) and
    the batch rows: every chosen row at every chosen position is steered,
    nothing else; either out of range is refused. The
    edit is in place on ``layers[l].layer_output``, so the next block, and any
    later read of it, sees the steered stream. Layers are visited in forward
    order, whatever order they are given in, each once.

    It steers the forward it is bound to: in ``model.generate`` the prompt's
    pass only (the generated tokens see it through the cache, unsteered
    themselves), unless called inside ``for step in tracer.all():``, where it
    steers each step's forward; ``generate_steered`` does that.
    """
    _arguments.inside_trace("steer")
    chosen = sorted(set(_arguments.layers(model, layers, function="steer", default_all=False)))
    vector = _arguments.vector(vector, model.hidden_size, function="steer", argument="vector")
    for layer in chosen:
        hidden = model.layers[layer].layer_output
        hidden[_where(hidden, batch_index, token_positions, "steer")] += (factor * vector).to(
            device=hidden.device, dtype=hidden.dtype
        )


def skip_layers(model: StandardModel, start: int, end: int, with_: Tensor | None = None) -> None:
    """Skip blocks ``start`` to ``end`` (inclusive): none of them runs; call it inside a trace.

    Negative indices count from the end; ``end`` must not come before
    ``start``. With ``with_=None`` each skipped block hands on its own input,
    so the stream entering ``start`` (its ``layer_input``) arrives unchanged
    at ``end + 1`` (or at the final norm when ``end`` is the last block). With
    a tensor ``[batch, seq, hidden_size]``, every skipped block hands on
    ``with_``, which is what ``end + 1`` receives. Call it before reading
    anything inside the skipped blocks, which then do not exist for this run.
    """
    _arguments.inside_trace("skip_layers")
    first = _arguments.layer(model, start, function="skip_layers", argument="start")
    last = _arguments.layer(model, end, function="skip_layers", argument="end")
    if last < first:
        raise _arguments.InvalidArgument(
            "skip_layers",
            "end",
            end,
            f"block {last}, which comes before start={start} (block {first})",
            "give end >= start",
        )
    if with_ is not None:
        with_ = _arguments.vector(with_, model.hidden_size, function="skip_layers", argument="with_")
    hidden = model.layers[first].layer_input if with_ is None else with_
    for layer in range(first, last + 1):
        model.layers[layer].skip(hidden)


def generate_steered(
    model: StandardModel,
    prompts: Any,
    layers: int | Sequence[int],
    vector: Tensor,
    factor: float = 1.0,
    *,
    max_new_tokens: int = 20,
    token_positions: Index = None,
    batch_index: Index = None,
    remote: bool | str = False,
    **generate_kwargs: Any,
) -> Tensor:
    """Generate with ``steer`` applied at every forward of the decode loop: the ids, ``[batch, prompt + new]``.

    ``prompts`` are strings or token ids (left-padded into one batch). The
    prompt's pass is steered at ``token_positions`` (each prompt's positions,
    ``-1`` its last token; None for all), and every generated step's forward,
    which holds only the new token, steers that token. Greedy unless
    ``generate_kwargs`` say otherwise (they go to ``model.generate``).
    """
    function = "generate_steered"
    _arguments.outside_trace(function)
    _arguments.layers(model, layers, function=function, default_all=False)
    _arguments.vector(vector, model.hidden_size, function=function, argument="vector")
    max_new_tokens = _arguments.count(max_new_tokens, function=function, argument="max_new_tokens")
    batch = _arguments.prompts(model, prompts, function=function)
    _arguments.positions(token_positions, batch.input_ids.shape[1], function=function, argument="token_positions")
    _arguments.indices(batch_index, len(batch), function=function, argument="batch_index", what="batch rows")
    generate_kwargs.setdefault("do_sample", False)
    ids: list[Tensor] = []
    with warnings.catch_warnings():
        # the open loop ends when the model stops, leaving its next step's request parked: nnsight warns, as it is meant to
        warnings.filterwarnings("ignore", message=".*was never reached.*")
        with (
            _arguments.left_padding(model),
            model.generate(max_new_tokens=max_new_tokens, remote=remote, **generate_kwargs) as tracer,
        ):
            with tracer.invoke(batch.inputs):
                for step in tracer.all():
                    steer(
                        model,
                        layers,
                        vector,
                        factor,
                        token_positions=token_positions if step == 0 else None,
                        batch_index=batch_index,
                    )
            with tracer.invoke():
                nnsight.save(ids)
                ids.append(tracer.result.detach().cpu())
    return ids[0]
