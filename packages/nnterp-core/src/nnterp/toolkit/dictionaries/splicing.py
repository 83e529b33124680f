"""Splicing a dictionary into a run: its (edited) reconstruction in place of the value it writes, in a trace or over prompts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import nnsight

import torch
from torch import Tensor

from ...errors import InvalidArgument
from ...protocols import StandardModel
from .. import _arguments
from .._arguments import Batch
from ..cache import _host
from . import _inputs
from ._inputs import Index, Prompts
from .dictionary import Dictionary


def splice(
    model: StandardModel,
    dictionary: Dictionary,
    *,
    edit: Callable[[Tensor], Tensor | None] | None = None,
    keep_error: bool = False,
) -> Tensor:
    """Put the dictionary's reconstruction in place of the value it writes; call it inside a trace. The features, ``[batch, seq, d_sae]``.

    Reads the value the dictionary ``reads`` (x), encodes it, lets
    ``edit(features)`` change the features (in place, or by returning new
    ones), and writes ``forward`` of the edited features into the value it
    ``writes``. With ``keep_error=True`` (the error-node convention) the
    written value is ``value + decode(edited) - decode(features)``: the
    reconstruction error is kept, so only the edit changes the model, and
    without an edit the value is written back unchanged, exactly.
    Call it before reading anything the write changes; outside a trace it is
    refused (``ToolkitInsideTrace``). ``edit`` must keep the features'
    shape (``InvalidArgument`` otherwise).
    """
    _arguments.inside_trace("splice")
    reads, writes = dictionary.sites(model, function="splice")
    reader, read_name = _host(model, reads)
    x = getattr(reader, read_name)
    local = dictionary._on(x.device)
    features = local.encode(x)
    edited = features
    if edit is not None:
        edited = features.clone()
        returned = edit(edited)
        edited = edited if returned is None else returned
        if not isinstance(edited, Tensor) or edited.shape != features.shape:
            raise InvalidArgument(
                "splice",
                "edit",
                edit,
                f"it returned {_described(edited)}, where the features are [{', '.join(map(str, features.shape))}] "
                f"([batch, seq, d_sae={dictionary.d_sae}])",
                "edit the features in place (returning None), or return a tensor of their shape",
            )
    writer, write_name = _host(model, writes)
    target = x if writes == reads else getattr(writer, write_name)
    if keep_error:
        new = target + (local.decode(edited, x) - local.decode(features, x)).to(target.dtype)
    else:
        new = local._output(edited, x)
    setattr(writer, write_name, new.to(target.dtype))
    return edited


def _described(value: Any) -> str:
    return (
        f"a tensor of shape [{', '.join(map(str, value.shape))}]"
        if isinstance(value, Tensor)
        else f"a {type(value).__name__}"
    )


@torch.no_grad()
def run_with_dictionary(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    *,
    edit: Callable[[Tensor], Tensor | None] | None = None,
    keep_error: bool = False,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` of a run with the dictionary spliced in (``splice``'s ``edit`` and ``keep_error``).

    Without ``keep_error`` the model runs on the reconstruction itself (its
    error changes the logits too); with it, only ``edit`` does. One trace;
    prompts (strings or token ids) are left-padded, whatever side the
    tokenizer pads, so position ``-1`` is every prompt's last token.
    """
    function = "run_with_dictionary"
    _arguments.outside_trace(function)
    dictionary.sites(model, function=function)
    return _spliced(model, dictionary, _inputs.as_batch(model, prompts, function), edit, keep_error, remote)


def _spliced(
    model: StandardModel, dictionary: Dictionary, batch: Batch, edit: Any, keep_error: bool, remote: bool | str
) -> Tensor:
    """The logits of one trace of ``batch`` with the dictionary spliced in (``splice``'s ``edit`` and ``keep_error``)."""
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
        nnsight.save(out)
        splice(model, dictionary, edit=edit, keep_error=keep_error)
        out.append(model.logits.detach().cpu())
    return out[0]


def ablate_features(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    features: int | Sequence[int],
    *,
    positions: Index = None,
    keep_error: bool = True,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` with ``features`` set to zero at ``positions`` (all by default).

    With ``keep_error`` (the default) nothing else changes: on a dictionary
    without input normalization the value loses exactly
    ``sum_i f_i * W_dec[i]`` of the ablated features.
    """
    return _set(model, dictionary, prompts, features, 0.0, positions, keep_error, remote, "ablate_features")


def set_features(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    features: int | Sequence[int],
    value: float | Tensor,
    *,
    positions: Index = None,
    keep_error: bool = True,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` with ``features``' activations set to ``value`` at ``positions`` (all by default).

    ``value`` is a number, or a tensor broadcastable to the selected
    ``[batch, positions, len(features)]`` activations. ``positions`` index the
    left-padded sequence axis (an int, a list, a slice; negative from the end;
    ``-1`` is every prompt's last token).
    """
    return _set(model, dictionary, prompts, features, value, positions, keep_error, remote, "set_features")


def _set(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    features: Any,
    value: Any,
    positions: Index,
    keep_error: bool,
    remote: Any,
    function: str,
) -> Tensor:
    """``set_features`` (and ``ablate_features``, ``value`` 0), every argument checked before the trace."""
    _arguments.outside_trace(function)
    dictionary.sites(model, function=function)
    chosen = _inputs.feature_index(dictionary, features, function)
    batch = _inputs.as_batch(model, prompts, function)
    where = _inputs.where(positions, batch, function)
    selected = (len(batch), batch.input_ids.shape[1] if isinstance(where, slice) else len(where), len(chosen))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            fits = torch.broadcast_shapes(torch.as_tensor(value).shape, selected) == selected
        except (RuntimeError, TypeError, ValueError):
            fits = False
        if not fits:
            raise InvalidArgument(
                function,
                "value",
                value,
                f"expected a number or a tensor broadcastable to the selected activations, "
                f"[batch, positions, features] = {list(selected)}",
                "give one value, one per feature ([features]), or one per position and feature",
            )

    def edit(acts: Tensor) -> None:
        rows = acts[:, where]
        rows[..., chosen.to(acts.device)] = torch.as_tensor(value, dtype=acts.dtype, device=acts.device)
        acts[:, where] = rows

    return _spliced(model, dictionary, batch, edit, keep_error, remote)
