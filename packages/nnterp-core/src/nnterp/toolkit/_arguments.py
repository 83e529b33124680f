"""Toolkit arguments checked before any model runs, refused in the caller's spelling with the fix.

Every toolkit function reads its arguments through these: block indices count
from the end when negative, as Python's do, and anything outside the model is an
``InvalidArgument`` (never wrapped around onto another block); prompts may be
strings or token ids and come back as one left-padded batch, whatever side the
tokenizer pads. ``outside_trace`` / ``inside_trace`` say where a function may be
called.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..errors import InvalidArgument, ToolkitInsideTrace
from ..protocols import StandardModel

__all__ = [
    "Batch",
    "count",
    "heads",
    "in_trace",
    "index",
    "inside_trace",
    "layer",
    "layers",
    "left_padding",
    "loaded",
    "names",
    "outside_trace",
    "positions",
    "prompt_positions",
    "prompts",
    "vector",
]


# -- where a function may run --------------------------------------------------------------


def in_trace() -> bool:
    """Whether the caller runs inside an open trace (on nnsight's worker)."""
    from greenlet import getcurrent

    return getattr(getcurrent(), "mediator", None) is not None


def outside_trace(function: str) -> None:
    """Refuse a call of ``function``, which runs forwards of its own, from inside an open trace."""
    if in_trace():
        raise ToolkitInsideTrace(
            f"{function}() runs the model itself, so it cannot run inside an open `with model.trace(...)` "
            f"(the trace's forward is the one running); call {function}() before or after the trace, "
            "or read the standard values it reads inside your own trace"
        )


def inside_trace(function: str) -> None:
    """Refuse a call of ``function``, which edits the running forward, outside a trace."""
    if not in_trace():
        raise ToolkitInsideTrace(
            f"{function}() edits the forward of an open trace, and none is open here; "
            f"call it inside `with model.trace(prompts):` (or `model.generate`), before reading what it changes"
        )


# -- indices -----------------------------------------------------------------------------------


def index(given: Any, size: int, *, function: str, argument: str, what: str) -> int:
    """One index into ``size`` things (``what``: "blocks", "heads"), negative from the end; out of range refused."""
    if isinstance(given, bool) or (isinstance(given, Tensor) and given.numel() != 1):
        raise InvalidArgument(function, argument, given, f"expected an int index of one of the {size} {what}")
    try:
        value = operator.index(given)
    except TypeError:
        raise InvalidArgument(function, argument, given, f"expected an int index of one of the {size} {what}") from None
    if not -size <= value < size:
        raise InvalidArgument(
            function,
            argument,
            given,
            f"the model has {size} {what}: indices 0 to {size - 1}, or -{size} to -1 counting from the end",
            "pick an index in that range",
        )
    return value % size


def indices(given: Any, size: int, *, function: str, argument: str, what: str, default_all: bool = True) -> list[int]:
    """Indices into ``size`` things, in the order given: None is all of them (where ``default_all``), an int one, a slice a range."""
    if given is None:
        if default_all:
            return list(range(size))
        raise InvalidArgument(function, argument, given, f"expected one or more of the {size} {what}")
    if isinstance(given, slice):
        return list(range(size))[given]
    expected = f"expected an int, a list of ints or a slice of the {size} {what}"
    if isinstance(given, Tensor):
        if given.is_floating_point():
            raise InvalidArgument(function, argument, given, expected)
        given = given.tolist()
    if isinstance(given, (bool, str, bytes)) or (not hasattr(given, "__index__") and not hasattr(given, "__iter__")):
        raise InvalidArgument(function, argument, given, expected)
    if hasattr(given, "__index__"):
        return [index(given, size, function=function, argument=argument, what=what)]
    chosen = list(given)
    if not chosen:
        raise InvalidArgument(
            function, argument, given, f"an empty selection of {what}", "give at least one index, or None for all"
        )
    out = []
    for item in chosen:
        try:
            out.append(index(item, size, function=function, argument=argument, what=what))
        except InvalidArgument as error:
            raise InvalidArgument(
                function, argument, given, f"item {item!r}: " + str(error).split("): ", 1)[1]
            ) from None
    return out


def layer(model: StandardModel, given: Any, *, function: str, argument: str = "layer") -> int:
    """One block index of ``model``, negative from the end."""
    return index(given, model.num_layers, function=function, argument=argument, what="blocks")


def layers(
    model: StandardModel, given: Any, *, function: str, argument: str = "layers", default_all: bool = True
) -> list[int]:
    """Block indices of ``model``, in the order given (None: every block)."""
    return indices(
        given, model.num_layers, function=function, argument=argument, what="blocks", default_all=default_all
    )


def heads(model: StandardModel, given: Any, *, function: str, argument: str = "heads") -> list[int]:
    """Attention head indices of ``model`` (None: every head)."""
    return indices(given, model.num_heads, function=function, argument=argument, what="attention heads")


def positions(given: Any, length: int, *, function: str, argument: str = "positions") -> list[int]:
    """Token positions of a ``length``-token (padded) sequence, negative from the end (None: every position)."""
    return indices(given, length, function=function, argument=argument, what="positions")


def prompt_positions(
    given: Any, lengths: Sequence[int], width: int, *, function: str, argument: str = "positions"
) -> Tensor:
    """Positions of each prompt of a left-padded batch as columns of it, ``[prompts, len(positions)]``.

    Each prompt's own positions: negative from its last token, non-negative
    from its first (a slice with a negative bound counts from the end); a
    position outside the shortest prompt (into another's padding) is refused.
    """
    shortest = min(lengths)
    given = slice(None) if given is None else given
    indices(
        given,
        shortest,
        function=function,
        argument=argument,
        what=f"positions of the shortest prompt ({shortest} tokens)",
    )
    if isinstance(given, slice):
        negative = any(bound is not None and bound < 0 for bound in (given.start, given.stop))
        signed = list(range(-shortest, 0) if negative else range(shortest))[given]
    else:
        signed = given.tolist() if isinstance(given, Tensor) else given
        signed = [operator.index(signed)] if hasattr(signed, "__index__") else [operator.index(item) for item in signed]
    return torch.tensor([[width + at if at < 0 else width - length + at for at in signed] for length in lengths])


def count(given: Any, *, function: str, argument: str, minimum: int = 1) -> int:
    """A whole number of at least ``minimum`` (a batch size, a ``k``)."""
    fix = f"pass {argument}={minimum} or more"
    if isinstance(given, bool) or not hasattr(given, "__index__"):
        raise InvalidArgument(function, argument, given, f"expected an int of at least {minimum}", fix)
    value = operator.index(given)
    if value < minimum:
        raise InvalidArgument(function, argument, given, f"expected an int of at least {minimum}", fix)
    return value


def names(given: Any, *, function: str, argument: str = "names") -> list[str]:
    """Standard names as a list (one name or several), refused when there is none or one is not a string."""
    iterable = isinstance(given, Iterable) and not isinstance(given, (bytes, Mapping, torch.Tensor))
    listed = [given] if isinstance(given, str) else list(given) if iterable else None
    if listed is None or not all(isinstance(name, str) for name in listed):
        raise InvalidArgument(function, argument, given, "expected a standard name or a list of them")
    if not listed:
        raise InvalidArgument(
            function, argument, given, "no values asked for", "name at least one, e.g. 'layers.0.layer_output'"
        )
    return listed


def vector(given: Any, width: int, *, function: str, argument: str, what: str = "the model's hidden_size") -> Tensor:
    """A tensor whose last axis is ``width`` wide (``what`` names that width)."""
    if not isinstance(given, Tensor):
        raise InvalidArgument(function, argument, given, f"expected a tensor whose last axis is {what} ({width})")
    if given.ndim == 0 or given.shape[-1] != width:
        raise InvalidArgument(
            function,
            argument,
            given,
            f"a tensor of shape {list(given.shape)}, whose last axis must be {what}, {width} wide",
            f"give a [{width}] vector (or one broadcastable to [batch, seq, {width}])",
        )
    return given


# -- prompts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """Prompts as one left-padded batch: ``input_ids`` and ``attention_mask``, ``[prompts, seq]``.

    Left-padded whatever side the tokenizer pads, so position ``-1`` is every
    prompt's last token; ``texts`` holds the strings where prompts were given
    as strings (else None). ``inputs`` is what a trace or forward takes.
    """

    input_ids: Tensor
    attention_mask: Tensor
    texts: list[str] | None = None

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def inputs(self) -> dict[str, Tensor]:
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask}

    def lengths(self) -> list[int]:
        """Each prompt's number of real tokens."""
        return self.attention_mask.sum(-1).tolist()

    def __getitem__(self, rows: slice) -> Batch:
        texts = self.texts[rows] if self.texts is not None else None
        return Batch(self.input_ids[rows], self.attention_mask[rows], texts)


def _id(item: Any) -> bool:
    """Whether ``item`` is one token id (an int, or a one-element int tensor: not a row of them)."""
    return (
        hasattr(item, "__index__") and not isinstance(item, bool) and not (isinstance(item, Tensor) and item.ndim > 0)
    )


def _ids_row(row: Any) -> bool:
    return isinstance(row, Sequence) and not isinstance(row, (str, bytes)) and all(_id(item) for item in row)


def left_padded(input_ids: Tensor, attention_mask: Tensor, pad_id: int) -> tuple[Tensor, Tensor]:
    """``input_ids`` and ``attention_mask`` with each row's real tokens moved to the right end (a left-padded batch)."""
    mask = attention_mask.bool()
    if not mask.any(-1).all() or bool(mask[:, -1].all()):
        return input_ids, attention_mask.long()  # already left-padded (or an empty row, which check_tokens refuses)
    lengths = mask.sum(-1)
    width = input_ids.shape[-1]
    ids = torch.full_like(input_ids, pad_id)
    out = torch.zeros_like(attention_mask, dtype=torch.long)
    for row in range(input_ids.shape[0]):
        real = input_ids[row][mask[row]]
        ids[row, width - int(lengths[row]) :] = real
        out[row, width - int(lengths[row]) :] = 1
    return ids, out


def prompts(
    model: StandardModel, given: Any, *, function: str, argument: str = "prompts", attention_mask: Tensor | None = None
) -> Batch:
    """``given`` as one left-padded ``Batch``: a string, strings, token ids (a tensor, a list of ints, a list of int lists) or an encoding.

    An encoding (a mapping with ``input_ids``, such as the tokenizer's output)
    carries its own ``attention_mask``; ``attention_mask=`` gives one for ids.
    A mask padded on the right is realigned to the left; unequal lists of ids
    are left-padded with the tokenizer's pad token. Anything else, an empty
    batch, and strings mixed with ids are refused.
    """
    tokenizer = model.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    form = "a string, a list of strings, token ids (a [seq] or [batch, seq] int tensor, a list of ints, a list of int lists) or the tokenizer's encoding"
    if isinstance(given, Mapping) or (
        hasattr(given, "data") and isinstance(getattr(given, "data", None), Mapping) and "input_ids" in given
    ):
        if "input_ids" not in given:
            raise InvalidArgument(function, argument, given, f"a mapping without input_ids; expected {form}")
        if attention_mask is None:
            attention_mask = given.get("attention_mask")
        given = given["input_ids"]
    if isinstance(given, str):
        given = [given]
    if isinstance(given, Tensor):
        if given.is_floating_point() or given.ndim not in (1, 2):
            raise InvalidArgument(function, argument, given, f"expected {form}")
        ids = given.reshape(1, -1) if given.ndim == 1 else given
        mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).reshape(ids.shape)
        return _finished(ids.long(), mask, pad_id, None, function, argument, given)
    if not isinstance(given, Sequence) or isinstance(given, bytes):
        raise InvalidArgument(function, argument, given, f"expected {form}")
    items = list(given)
    if not items:
        raise InvalidArgument(function, argument, given, "no prompts", "give at least one prompt")
    if all(isinstance(item, str) for item in items):
        encoding = tokenizer(items, padding=True, return_tensors="pt", padding_side="left")
        return Batch(encoding["input_ids"], encoding["attention_mask"], items)
    if all(_id(item) for item in items):
        items = [items]  # one prompt as a list of ids
    if all(isinstance(item, Tensor) and item.ndim == 1 and not item.is_floating_point() for item in items):
        items = [item.tolist() for item in items]
    if not all(_ids_row(item) for item in items):
        kinds = ", ".join(sorted({type(item).__name__ for item in items}))
        raise InvalidArgument(
            function,
            argument,
            given,
            f"a batch mixing {kinds}; expected {form}",
            "give one kind: strings, or token ids",
        )
    width = max(len(item) for item in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, item in enumerate(items):
        if item:
            ids[row, width - len(item) :] = torch.tensor([operator.index(token) for token in item])
            mask[row, width - len(item) :] = 1
    if attention_mask is not None:
        mask = torch.as_tensor(attention_mask).reshape(ids.shape).long() if len(set(map(len, items))) == 1 else mask
    return _finished(ids, mask, pad_id, None, function, argument, given)


@contextmanager
def left_padding(model: StandardModel) -> Iterator[None]:
    """While a toolkit function runs its forwards on a left-padded ``Batch``, the tokenizer reads as padding left.

    nnsight gives each left-padded row its positions from the mask only for a
    left-padding tokenizer: with one that pads right, the short rows of a
    ``Batch`` would run at shifted positions (wrong values on GPT-2's learned
    positions). The tokenizer's own side is restored after.
    """
    tokenizer: Any = getattr(model, "tokenizer", None)  # one with a padding side past the check below
    side = getattr(tokenizer, "padding_side", None)
    if side is None or side == "left":
        yield
        return
    tokenizer.padding_side = "left"
    try:
        yield
    finally:
        tokenizer.padding_side = side


def _finished(
    ids: Tensor, mask: Tensor, pad_id: int, texts: list[str] | None, function: str, argument: str, given: Any
) -> Batch:
    if mask.shape != ids.shape:
        raise InvalidArgument(
            function,
            "attention_mask",
            f"a mask of shape {list(mask.shape)}",
            f"expected the ids' shape {list(ids.shape)}",
        )
    if ids.shape[-1] == 0 or not mask.bool().any(-1).all():
        raise InvalidArgument(
            function, argument, given, "a prompt with no tokens", "give every prompt at least one token"
        )
    ids, mask = left_padded(ids, mask, pad_id)
    return Batch(ids, mask, texts)


# -- weights -----------------------------------------------------------------------------------


def loaded(model: StandardModel) -> Any:
    """``model`` with its real weights: nnsight loads them at the first trace, and until then they sit on the meta device.

    A toolkit function that reads a weight outside a trace (the unembedding, a
    norm) calls this first.
    """
    if not getattr(model, "dispatched", True):
        model.dispatch()
    return model
