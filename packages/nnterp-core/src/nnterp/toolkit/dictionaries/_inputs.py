"""What the prompt-level functions take, checked before any trace: prompts as one left-padded batch, positions, feature indices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ...errors import InvalidArgument
from ...protocols import StandardModel
from .. import _arguments
from .._arguments import Batch

if TYPE_CHECKING:
    from .dictionary import Dictionary

#: strings or token ids, as ``_arguments.prompts`` reads them (a tensor, id lists, the tokenizer's encoding)
Prompts = str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]] | Tensor | Any
Index = int | Sequence[int] | slice | Tensor | None


def as_batch(model: StandardModel, prompts: Prompts, function: str) -> Batch:
    """The prompts as one left-padded ``Batch`` (strings or token ids; ``_arguments.prompts``), after the call's own checks."""
    return _arguments.prompts(model, prompts, function=function)


def in_batches(batch: Batch, batch_size: int) -> list[dict[str, Tensor]]:
    """The left-padded prompts (one length), ``batch_size`` at a time, as a trace's inputs."""
    return [batch[start : start + batch_size].inputs for start in range(0, len(batch), batch_size)]


def where(positions: Index, batch: Batch, function: str) -> slice | Tensor:
    """``positions`` on the batch's left-padded sequence axis (None: all), negative from the end; out of range refused."""
    if positions is None:
        return slice(None)
    chosen = _arguments.positions(positions, batch.input_ids.shape[1], function=function)
    return torch.tensor(list(dict.fromkeys(chosen)), dtype=torch.long)


def feature_index(dictionary: Dictionary, features: Index, function: str) -> Tensor:
    """``features`` as indices of the dictionary's ``d_sae`` features, negative from the end; out of range refused."""
    expected = f"expected an int or a list of ints, indices of the dictionary's d_sae={dictionary.d_sae} features"
    if isinstance(features, Tensor):
        if features.is_floating_point() or features.dtype == torch.bool:
            raise InvalidArgument(function, "features", features, expected)
        features = features.reshape(-1).tolist()
    if isinstance(features, (bool, str, bytes, float)):
        raise InvalidArgument(function, "features", features, expected)
    # read by duck type, whatever the caller gave: an index, or an iterable of them; anything else is refused below
    given: Any = features
    items = [given] if hasattr(given, "__index__") else list(given) if hasattr(given, "__iter__") else None
    if items is None or any(isinstance(item, bool) or not hasattr(item, "__index__") for item in items):
        raise InvalidArgument(function, "features", features, expected)
    if not items:
        raise InvalidArgument(function, "features", features, "no features chosen", "give at least one feature index")
    outside = [int(item) for item in items if not -dictionary.d_sae <= int(item) < dictionary.d_sae]
    if outside:
        raise InvalidArgument(
            function,
            "features",
            features,
            f"{outside} out of range: the dictionary has d_sae={dictionary.d_sae} features, "
            f"indices 0 to {dictionary.d_sae - 1} (or -{dictionary.d_sae} to -1 from the end)",
            "pick features of this dictionary",
        )
    return torch.tensor([int(item) % dictionary.d_sae for item in items], dtype=torch.long)


# -- over prompts ------------------------------------------------------------------
