"""A dictionary's feature activations over prompts, batch by batch, each forward stopped once the value is read."""

from __future__ import annotations

from collections.abc import Sequence

import nnsight

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ...protocols import StandardModel
from .. import _arguments
from ..cache import _host
from . import _inputs
from ._inputs import Prompts
from .dictionary import Dictionary


@torch.no_grad()
def feature_activations(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    *,
    features: int | Sequence[int] | None = None,
    batch_size: int = 8,
    progress: bool = True,
    remote: bool | str = False,
) -> Tensor:
    """The dictionary's feature activations on each prompt, ``[batch, seq, d_sae]`` (``[..., len(features)]`` with ``features``).

    Encodes the value the dictionary reads, in the trace (on the model's
    device), batch by batch; each forward stops once the value is read.
    Prompts (strings or token ids) are left-padded to the longest one,
    whatever side the tokenizer pads, padding positions included: a prompt's
    real tokens are its last ones, and position ``-1`` its last token.
    """
    function = "feature_activations"
    _arguments.outside_trace(function)
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    reads, _ = dictionary.sites(model, function=function)
    chosen = None if features is None else _inputs.feature_index(dictionary, features, function)
    batches = _inputs.in_batches(_inputs.as_batch(model, prompts, function), batch_size)
    parts: list[Tensor] = []
    for batch in tqdm(batches, desc=function, disable=not progress):
        out: list[Tensor] = []
        with _arguments.left_padding(model), model.trace(batch, remote=remote) as tracer:
            nnsight.save(out)
            reader, name = _host(model, reads)
            x = getattr(reader, name)
            acts = dictionary._on(x.device).encode(x)
            if chosen is not None:
                acts = acts[..., chosen.to(acts.device)]
            out.append(acts.cpu())
            tracer.stop()
        parts.append(out[0])
    return torch.cat(parts)
