"""Prompts the model cannot run, refused before the forward with what is wrong and how to fix it.

Left alone, each fails deep inside the model in torch's words: an empty prompt
as ``cannot reshape tensor of 0 elements`` in the attention, a batch mixing
strings and token ids as ``can only concatenate str``, an id outside the
vocabulary as the embedding's ``index out of range``, a prompt longer than a
learned position table as the same, one layer further.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from .errors import InvalidPrompt


def check_invokes(invokes: list) -> None:
    """Refuse an invoke whose prompts mix strings and token ids, before anything is tokenized."""
    for inputs, kwargs in invokes:
        prompts = inputs[0] if inputs else kwargs.get("text")
        if not isinstance(prompts, (list, tuple)) or not prompts:
            continue
        strings = [isinstance(prompt, str) for prompt in prompts]
        if any(strings) and not all(strings):
            kinds = ", ".join(
                "a string" if string else f"a {type(prompt).__name__}" for string, prompt in zip(strings, prompts)
            )
            raise InvalidPrompt(
                f"this invoke mixes strings and token ids in one batch ({kinds}); give one kind per invoke: "
                "strings (the tokenizer encodes and pads them), or token ids (a list of int lists, or a tensor), "
                "and put the other kind in an invoke of its own (with tracer.invoke(...))"
            )


def check_tokens(model: Any, args: tuple, kwargs: dict, prompts: list) -> None:
    """Refuse empty rows, ids outside the vocabulary and prompts longer than a learned position table."""
    ids = kwargs.get("input_ids")
    if ids is None and args and isinstance(args[0], torch.Tensor) and not args[0].is_floating_point():
        ids = args[0]
    if not isinstance(ids, torch.Tensor):
        return
    ids = ids if ids.ndim > 1 else ids.unsqueeze(0)
    mask = kwargs.get("attention_mask")
    mask = mask if isinstance(mask, torch.Tensor) and mask.shape == ids.shape else None
    filled = _filled(mask) if mask is not None and ids.shape[-1] else []
    if ids.shape[-1] == 0 or False in filled:
        row = 0 if ids.shape[-1] == 0 else filled.index(False)
        prompt = f" ({prompts[row]!r})" if row < len(prompts) else ""
        raise InvalidPrompt(
            f"prompt {row} of the batch{prompt} has no tokens, so the model has nothing to run on; "
            "give at least one token (the tokenizer adds none to an empty string here)"
        )
    rows = vocabulary_rows(model)
    # the common case in one reduction: every id inside the table
    if rows is not None and ids.numel() and _outside(ids, rows):
        outside = (ids < 0) | (ids >= rows)
        if mask is not None:
            outside &= mask.bool()
        outside &= ~torch.isin(ids, torch.tensor(special_ids(model), dtype=ids.dtype))
        if outside.any():
            row, position = (int(index) for index in outside.nonzero()[0])
            raise InvalidPrompt(
                f"token id {int(ids[row, position])} (prompt {row}, position {position}) is outside the vocabulary: "
                f"this model embeds ids 0 to {rows - 1}; encode text with model.tokenizer, or check the ids' source"
            )
    limit = position_limit(model)
    if limit is not None and ids.shape[-1] > limit:
        raise InvalidPrompt(
            f"the prompt is {ids.shape[-1]} tokens long, and this model's learned position table has {limit} "
            f"positions; shorten it to at most {limit} tokens"
        )


#: a batch of at most this many tokens is checked on its ids read back as lists: at a trace's start, with
#: nothing warm, a torch reduction and its read-back cost about 20 us, reading back a few hundred numbers less
SMALL = 512


def _small(tensor: torch.Tensor) -> bool:
    return tensor.is_cpu and tensor.ndim == 2 and tensor.numel() <= SMALL


def _filled(mask: torch.Tensor) -> list[bool]:
    """Whether each row of ``mask`` has a token: one flag a row."""
    if _small(mask):
        return [any(row) for row in mask.tolist()]
    return mask.any(-1).tolist()


def _outside(ids: torch.Tensor, rows: int) -> bool:
    """Whether some id lies outside ``0 .. rows - 1``: the smallest and largest in one pass."""
    if _small(ids):
        values = ids.tolist()
        return min(map(min, values)) < 0 or max(map(max, values)) >= rows
    low, high = torch.aminmax(ids)
    return int(low) < 0 or int(high) >= rows


def vocabulary_rows(model: Any) -> int | None:
    """How many token ids the input embedding holds, or None where it is no plain embedding table."""
    embedding = model.__dict__.get("embed_tokens")
    module = getattr(embedding, "_module", None)
    if isinstance(module, torch.nn.Embedding) and module.num_embeddings:
        return int(module.num_embeddings)  # the common case, without the weight's lookup through Module.__getattr__
    weight = getattr(module, "weight", None)
    if not isinstance(module, torch.nn.Embedding) and not (isinstance(weight, torch.Tensor) and weight.ndim == 2):
        return None
    # the weight is a plain embedding's, or the 2-D tensor checked above
    return int(getattr(module, "num_embeddings", None) or cast(torch.Tensor, weight).shape[0])


def special_ids(model: Any) -> list[int]:
    """The config's token ids (an image placeholder may lie past the text vocabulary: the wrapper replaces it first)."""
    found: list[int] = []

    def collect(config: dict) -> None:
        for key, value in config.items():
            key = str(key)
            if "token" in key and isinstance(value, int) and not isinstance(value, bool):
                found.append(value)
            elif "token" in key and isinstance(value, (list, tuple)):
                found.extend(item for item in value if isinstance(item, int))
            elif isinstance(value, dict):
                collect(value)

    collect(model._module.config.to_dict())
    return found


def position_limit(model: Any) -> int | None:
    """The positions of a learned position table (GPT-2's ``wpe``, OPT's ``embed_positions``), or None for rotary and ALiBi models."""
    cached = model.__dict__.get("_nnterp_position_limit", False)
    if cached is not False:
        return cached
    limit = getattr(model.text_config, "max_position_embeddings", None) or getattr(
        model.text_config, "n_positions", None
    )
    found = None
    if isinstance(limit, int):
        for name, module in model._module.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if (
                isinstance(module, torch.nn.Embedding)
                and ("pos" in leaf or leaf == "wpe")
                and 0 <= module.num_embeddings - limit <= 2
            ):
                found = limit
                break
    model.__dict__["_nnterp_position_limit"] = found
    return found
