"""Steering with a dictionary's features: their decoder rows added to the value it writes, nothing encoded."""

from __future__ import annotations

from collections.abc import Sequence

import nnsight

import torch
from torch import Tensor

from ...errors import InvalidArgument
from ...protocols import StandardModel
from .. import _arguments
from ..cache import _host
from . import _inputs
from ._inputs import Index, Prompts
from .dictionary import Dictionary


@torch.no_grad()
def steer_features(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    features: int | Sequence[int],
    coefficient: float | Sequence[float] = 1.0,
    *,
    positions: Index = None,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` with ``coefficient * W_dec[feature]`` added to the value the dictionary writes.

    One coefficient for all ``features`` or one each; at ``positions`` (all
    by default). Nothing is encoded: the decoder rows are added as they are
    (in the normalized units, for a dictionary that normalizes its input).
    """
    function = "steer_features"
    _arguments.outside_trace(function)
    _, writes = dictionary.sites(model, function=function)
    chosen = _inputs.feature_index(dictionary, features, function)
    try:
        coefficients = torch.as_tensor(coefficient, dtype=dictionary.W_dec.dtype).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        coefficients = None
    if coefficients is None or len(coefficients) not in (1, len(chosen)):
        raise InvalidArgument(
            function,
            "coefficient",
            coefficient,
            f"{len(chosen)} features chosen; expected one number, or one per feature",
            "give a float, or a list as long as features",
        )
    batch = _inputs.as_batch(model, prompts, function)
    where = _inputs.where(positions, batch, function)
    direction = (
        coefficients.to(dictionary.W_dec.device)[:, None] * dictionary.W_dec[chosen.to(dictionary.W_dec.device)]
    ).sum(0)
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
        nnsight.save(out)
        writer, name = _host(model, writes)
        value = getattr(writer, name)
        steered = value.clone()
        steered[:, where] += direction.to(device=value.device, dtype=value.dtype)
        setattr(writer, name, steered)
        out.append(model.logits.detach().cpu())
    return out[0]
