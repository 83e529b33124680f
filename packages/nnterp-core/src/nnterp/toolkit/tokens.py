"""Tokens as readable strings: one label per token, with the bytes shown where a token holds part of a character.

``str_tokens`` is TransformerLens's ``to_str_tokens``: each token decoded on
its own. A byte-level BPE token (GPT-2, Llama 3, Qwen) or a byte-fallback
token (``<0xE6>``: Llama 2, Gemma, Mistral) may hold only some of a
multi-byte UTF-8 character, and decoding it alone gives '\ufffd' ('�'). Such a
token is labelled with its bytes instead: the whole characters it holds as
they are, each byte of a broken character as Python writes a byte,
backslash, ``x`` and two lowercase hex digits (``'\\xe6'``, four characters;
``bytes.decode("utf-8", "backslashreplace")``). Every other token is its
decoding, unchanged (spaces stay spaces, as in TransformerLens). The plots
and sweeps label their positions with ``token_labels``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

from torch import Tensor

from ..protocols import StandardModel
from . import _arguments

__all__ = ["str_tokens", "token_bytes", "token_labels"]

REPLACEMENT = "\ufffd"
_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte (``bytes_to_unicode``), inverted: character to byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    characters = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return {chr(character): byte for byte, character in zip(printable, characters)}


def _decoder_types(tokenizer: Any) -> set[str]:
    """The ``type``s of the fast tokenizer's decoder (a ``Sequence``'s parts included); empty for a slow tokenizer."""
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is None:
        return set()
    try:
        state = json.loads(decoder.__getstate__())
    except Exception:  # noqa: BLE001 - a decoder that does not serialize: no byte-level mapping known
        return set()
    found: set[str] = set()
    stack = [state]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("type"), str):
                found.add(item["type"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _ids(ids: Any, function: str) -> list[int]:
    if isinstance(ids, Tensor):
        if ids.is_floating_point() or ids.ndim > 1:
            raise _arguments.InvalidArgument(
                function, "ids", ids, "expected one sequence of token ids (a [seq] int tensor or a list of ints)"
            )
        return [int(i) for i in ids.reshape(-1).tolist()]
    if hasattr(ids, "__index__") and not isinstance(ids, bool):
        return [int(ids)]
    if (
        isinstance(ids, (str, bytes))
        or not isinstance(ids, Sequence)
        or not all(hasattr(i, "__index__") and not isinstance(i, bool) for i in ids)
    ):
        raise _arguments.InvalidArgument(
            function,
            "ids",
            ids,
            "expected one sequence of token ids (a [seq] int tensor or a list of ints)",
            "tokenize a string first, or use str_tokens(model, text)",
        )
    return [int(i) for i in ids]


def token_bytes(tokenizer: Any, ids: Any) -> list[bytes | None]:
    """Each token's bytes as the text holds them, one per id; None where the tokenizer does not say.

    A byte-level token maps back through GPT-2's byte alphabet, a
    byte-fallback token ``<0xE6>`` is its byte, a special (added) token its
    text, and any other token its string with SentencePiece's ``▁`` read as
    a space. Joined, a prompt's tokens' bytes are the prompt's bytes (after
    a leading space where the tokenizer adds a dummy prefix, as Llama 2's does).
    """
    ids = _ids(ids, "token_bytes")
    tokens = tokenizer.convert_ids_to_tokens(ids)
    added = {index: str(token) for index, token in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    byte_decoder = getattr(tokenizer, "byte_decoder", None)  # a slow GPT-2 tokenizer's own table
    if byte_decoder is None and "ByteLevel" in _decoder_types(tokenizer):
        byte_decoder = _byte_level_alphabet()
    out: list[bytes | None] = []
    for index, token in zip(ids, tokens):
        if token is None:
            out.append(None)
        elif index in added:
            out.append(added[index].encode("utf-8"))
        elif byte_decoder is not None:
            out.append(bytes(byte_decoder[c] for c in token) if all(c in byte_decoder for c in token) else None)
        elif (match := _BYTE_TOKEN.match(token)) is not None:
            out.append(bytes([int(match.group(1), 16)]))
        else:
            out.append(token.replace("▁", " ").encode("utf-8"))
    return out


def token_labels(tokenizer: Any, ids: Any) -> list[str]:
    """Each token as a readable string, one per id: its decoding alone, or its bytes where that is '�'.

    ``ids`` is one sequence of token ids (a ``[seq]`` tensor or a list of
    ints). A token whose decoding holds the replacement character, because it
    holds only part of a UTF-8 character, is shown as its bytes read with
    ``backslashreplace``: whole characters as they are, each stray byte as
    ``\\xe6`` (``'\\\\xe6'`` in Python source). A token that truly is '�' (its
    bytes decode to it) stays '�'.
    """
    ids = _ids(ids, "token_labels")
    labels = [tokenizer.decode([index], clean_up_tokenization_spaces=False) for index in ids]
    broken = [position for position, label in enumerate(labels) if REPLACEMENT in label]
    if broken:
        raw = token_bytes(tokenizer, [ids[position] for position in broken])
        for position, held in zip(broken, raw):
            if held is None:
                continue
            try:
                held.decode("utf-8")
            except UnicodeDecodeError:
                labels[position] = held.decode("utf-8", "backslashreplace")
    return labels


def str_tokens(model: StandardModel, prompts: Any) -> list[str] | list[list[str]]:
    """The prompt's tokens as strings, one per token, as the toolkit's functions tokenize it (TransformerLens's ``to_str_tokens``).

    ``prompts`` is a string or token ids (``[seq]``, a list of ints) for one
    prompt, which gives ``[seq]`` labels; or several (a list of strings, a
    ``[batch, seq]`` tensor, id lists), which gives one list per prompt, each
    its own tokens without padding. The positions are those of
    ``logit_lens`` and the patching sweeps. Labels are ``token_labels``':
    a token holding part of a character shows its bytes (``\\xe6``), not '�'.
    ``model`` may be a tokenizer.
    """
    holder = model if hasattr(model, "tokenizer") else SimpleNamespace(tokenizer=model)
    tokenizer = holder.tokenizer
    one = isinstance(prompts, str) or (isinstance(prompts, Tensor) and prompts.ndim == 1)
    one = one or (
        isinstance(prompts, Sequence)
        and not isinstance(prompts, (str, bytes))
        and len(prompts) > 0
        and all(
            hasattr(item, "__index__") and not isinstance(item, bool) and not isinstance(item, Tensor)
            for item in prompts
        )
    )
    texts = [prompts] if isinstance(prompts, str) else prompts
    if isinstance(texts, Sequence) and texts and all(isinstance(text, str) for text in texts):
        rows = [tokenizer(text)["input_ids"] for text in texts]  # the batch's tokens, with no pad token needed
    else:
        batch = _arguments.prompts(holder, prompts, function="str_tokens")
        rows = [ids[mask.bool()] for ids, mask in zip(batch.input_ids, batch.attention_mask)]
    labels = [token_labels(tokenizer, row) for row in rows]
    return labels[0] if one else labels
