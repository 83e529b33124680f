"""Dataset-scale extraction of standard values to disk: ``extract_values`` writes shards, ``ActivationShards`` reads them.

What a dictionary or a probe trains on: the per-token values of millions of
tokens, streamed to safetensors shards of a fixed number of rows, one row per
real (non-padding) token, with the document it came from, its position in that
document and its token id. Memory holds one batch and one shard's buffer;
nothing accumulates across shards. An interrupted extraction, run again with
the same call, continues where it stopped and ends with exactly the shards an
uninterrupted run writes::

    extract_values(model, dataset, ["layers.6.layer_output"], "acts/", column="text", max_length=128)
    shards = load_activations("acts/")
    for rows in shards.batches(4096):        # {"layers.6.layer_output": [4096, hidden_size], "document": ..., ...}
        ...

A directory holds ``manifest.json`` (the settings, each value's dtype and row
shape, and per shard how many tokens and texts it covers) and
``shard-00000.safetensors``, ``shard-00001.safetensors`` ... Each shard is
written to a ``.tmp`` file and renamed into place, then listed in the
manifest (itself replaced atomically): a file the manifest does not list is
ignored, and overwritten when the extraction continues.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor
from tqdm.auto import tqdm

from ..errors import InvalidArgument
from ..layouts import BATCH, SEQ
from ..protocols import StandardModel
from . import _arguments
from .cache import BatchReader, _check_dtype, _check_engine, _host, _layer_of, _root_values, expand_names

__all__ = ["DOCUMENT", "POSITION", "TOKEN", "ActivationShards", "extract_values", "load_activations"]

#: the per-row columns every shard holds beside the values: the text's index in the stream, the token's position in it, its id
DOCUMENT, POSITION, TOKEN = "document", "position", "token"
METADATA = (DOCUMENT, POSITION, TOKEN)

MANIFEST = "manifest.json"
FORMAT = "nnterp.activations/1"
#: the settings a continued extraction must share with the one it continues: any of them changes the rows
SETTINGS = ("model", "model_class", "values", "column", "batch_size", "max_length", "shard_tokens", "dtype")
_SHARD = re.compile(r"^shard-(\d{5,})\.safetensors$")


def _shard_file(index: int) -> str:
    return f"shard-{index:05d}.safetensors"


def _dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


# -- the manifest --------------------------------------------------------------------


def _write_json(path: Path, content: dict) -> None:
    """Replace ``path`` by ``content`` atomically: a reader sees the old manifest or the new one, never half of one."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(content, indent=1))
    os.replace(temporary, path)


def _read_manifest(directory: Path) -> dict | None:
    path = directory / MANIFEST
    if not path.exists():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not an nnterp extraction manifest (format {manifest.get('format')!r}, expected {FORMAT!r})"
        )
    return manifest


def _check_settings(directory: Path, found: dict, wanted: dict) -> None:
    """Refuse to continue (or return) an extraction made with other settings: its rows would mix with rows that differ.

    The ``InvalidArgument`` names the first argument that differs (``model`` for the model and its class) and lists them all.
    """
    differ = [key for key in SETTINGS if found.get(key) != wanted.get(key)]
    if differ:
        lines = ", ".join(f"{key}: {found.get(key)!r} there, {wanted.get(key)!r} asked" for key in differ)
        argument = "model" if differ[0] == "model_class" else differ[0]
        raise InvalidArgument(
            "extract_values",
            argument,
            wanted.get(differ[0]),
            f"{directory} holds an extraction made with other settings ({lines})",
            "continue it with the same call, or extract into a new (or emptied) directory",
        )


# -- the texts -----------------------------------------------------------------------


def _texts(texts: Any, column: str) -> Iterator[str | list[int]]:
    """The stream of documents, one at a time: strings or token ids (a list of ints, a ``[seq]`` int tensor), or rows of
    a ``datasets`` Dataset (any mapping) read at ``column``. A stream of another kind is refused here, a document of
    another kind when it is reached."""
    if isinstance(texts, str):
        texts = [texts]
    if (
        isinstance(texts, (Mapping, bytes))
        or (isinstance(texts, Tensor) and texts.ndim < 2)
        or not hasattr(texts, "__iter__")
    ):
        expected = "an iterable of documents (strings, or token id lists), or a Dataset read at column="
        raise InvalidArgument(
            "extract_values", "texts", texts, expected, "wrap one document in a list: [text] or [ids]"
        )
    if hasattr(texts, "select_columns") and column in (getattr(texts, "column_names", None) or ()):
        texts = texts.select_columns([column])  # a Dataset: decode only the text column
    return _documents(texts, column)


def _documents(texts: Iterable, column: str) -> Iterator[str | list[int]]:
    for index, item in enumerate(texts):
        if isinstance(item, Mapping):
            if column not in item:
                raise KeyError(
                    f"text {index} has no column {column!r} (it has {', '.join(map(str, item))}): pass column="
                )
            item = item[column]
        if isinstance(item, str):
            yield item
            continue
        if isinstance(item, Tensor) and item.ndim == 1 and not item.is_floating_point() and item.dtype != torch.bool:
            item = item.tolist()
        if isinstance(item, (list, tuple)) and all(
            hasattr(token, "__index__") and not isinstance(token, bool) for token in item
        ):
            yield [int(token) for token in item]
            continue
        raise InvalidArgument(
            "extract_values",
            "texts",
            item,
            f"document {index} is a {type(item).__name__}; expected a string or a document's token ids (a list of ints, a [seq] int tensor)",
            "pass strings, id lists, or a Dataset with column=",
        )


def _digest(hasher: Any, text: str | list[int]) -> None:
    """Add one document to the texts' digest: a string by its UTF-8 bytes, token ids (marked apart) by their int64 bytes."""
    if isinstance(text, str):
        data = text.encode("utf-8")
    else:
        data = torch.tensor(text, dtype=torch.int64).numpy().tobytes()
        hasher.update(b"\xffids\xff\xff\xff\xff")  # no string's 8-byte length starts so
    hasher.update(len(data).to_bytes(8, "little"))
    hasher.update(data)


def _tokenized(model: StandardModel, chunk: list[str | list[int]], max_length: int | None) -> list[list[int]]:
    """Each document's token ids: strings tokenized (with the tokenizer's special tokens), ids as given; cut to ``max_length``."""
    strings = [text for text in chunk if isinstance(text, str)]
    encoded = iter(
        model.tokenizer(strings, truncation=max_length is not None, max_length=max_length)["input_ids"]
        if strings
        else []
    )
    return [next(encoded) if isinstance(text, str) else text[:max_length] for text in chunk]


# -- which values --------------------------------------------------------------------


def _token_axes(model: StandardModel, requested: list[str]) -> list[int]:
    """Each value's token axis (``seq``), checked: a value without one has no row per token."""
    axes = []
    for name in requested:
        host, value = _host(model, name)
        dims = getattr(type(host), value).dims
        if dims is None or SEQ not in dims or dims[0] != BATCH:
            shown = "no declared layout" if dims is None else f"[{', '.join(dims)}]"
            raise ValueError(
                f"{name!r} is {shown}: it has no row per token to extract (attention patterns have a query and a key "
                "axis); extract per-token values such as layer_output, attention_head_outputs or mlp_neurons, "
                "or read this one with cache_values"
            )
        axes.append(dims.index(SEQ))
    return axes


def _stop_layer(model: StandardModel, requested: list[str]) -> int | None:
    """The last block the values need when none is read after the blocks (``logits``): the forward can end there."""
    after = _root_values(model)[1]
    layers = [_layer_of(name) for name in requested]
    known = [layer for layer in layers if layer is not None]
    if any(name in after for name in requested) or len(known) < len(layers):
        return None
    return max(known)


# -- the shard buffer ----------------------------------------------------------------


class _Shards:
    """The buffer of the shard being filled, and the manifest it is committed to when full."""

    def __init__(self, directory: Path, manifest: dict) -> None:
        self.directory, self.manifest = directory, manifest
        self.buffers: dict[str, Tensor] = {}
        self.filled = 0
        self.documents: set[int] = set()
        #: where a run continues when a shard ends with the current batch: the next batch, and the digest of the texts up to it
        self.after_batch: tuple[int, int, str] = (0, 0, "")

    @property
    def capacity(self) -> int:
        return self.manifest["settings"]["shard_tokens"]

    def allocate(self, rows: dict[str, Tensor]) -> None:
        """Buffers of one shard's rows, shaped as the first batch's; checked against the manifest's on a continued run."""
        found = {
            name: {"dtype": _dtype_name(tensor.dtype), "shape": list(tensor.shape[1:])} for name, tensor in rows.items()
        }
        known = self.manifest.get("columns")
        if known is not None and known != found:
            raise ValueError(
                f"{self.directory}: this run's rows are {found}, the shards' {known}; extract into a new directory"
            )
        self.manifest["columns"] = found
        self.buffers = {
            name: torch.empty((self.capacity, *tensor.shape[1:]), dtype=tensor.dtype) for name, tensor in rows.items()
        }

    def add(self, rows: dict[str, Tensor], start: int, batch: int, digest: str) -> int:
        """Copy rows from ``start`` on until the buffer is full or the rows end, committing a full buffer; returns where it stopped.

        ``batch`` is the rows' batch and ``digest`` that of the texts before it:
        a shard that ends inside the batch says a continued run starts there.
        """
        if not self.buffers:
            self.allocate(rows)
        count = next(iter(rows.values())).shape[0]
        take = min(count - start, self.capacity - self.filled)
        for name, tensor in rows.items():
            self.buffers[name][self.filled : self.filled + take] = tensor[start : start + take]
        self.documents.update(rows[DOCUMENT][start : start + take].unique().tolist())
        self.filled += take
        if self.filled == self.capacity:
            # inside a batch: the digest through the batch too, so that a continued run checks the texts it runs again
            self.commit(
                (batch, start + take, digest, self.after_batch[2]) if start + take < count else self.after_batch
            )
        return start + take

    def commit(self, resume: tuple, complete: dict | None = None) -> None:
        """Write the buffer's rows as the next shard (temp file, then rename), then list it in the manifest (replaced atomically).

        ``resume`` is where a run continuing this shard picks up: the batch to
        run again, the rows of it already written, the digest of the texts
        before that batch (and through it, when rows of it are written).
        ``complete`` (the totals) marks the extraction done.
        """
        shards = self.manifest["shards"]
        if self.filled:
            name = _shard_file(len(shards))
            temporary = self.directory / (name + ".tmp")
            save_file({key: buffer[: self.filled] for key, buffer in self.buffers.items()}, str(temporary))
            os.replace(temporary, self.directory / name)
            shards.append(
                {
                    "file": name,
                    "tokens": self.filled,
                    "texts": len(self.documents),
                    "documents": [min(self.documents), max(self.documents)],
                    "resume": {
                        "batch": resume[0],
                        "row": resume[1],
                        "texts_sha256": resume[2],
                        "batch_sha256": resume[3] if len(resume) > 3 else None,
                    },
                }
            )
        if complete is not None:
            self.manifest.update(complete, complete=True)
        self.manifest["tokens"] = sum(shard["tokens"] for shard in shards)
        _write_json(self.directory / MANIFEST, self.manifest)
        self.filled = 0
        self.documents = set()


def _temporary(path: Path) -> bool:
    """A file a write killed midway leaves: ours (``*.tmp``), or the one safetensors writes before renaming (``.tmp*``)."""
    return path.name.endswith(".tmp") or path.name.startswith(".tmp")


def _prepare(directory: Path, settings: dict) -> dict:
    """The manifest to extend: the directory's own (settings checked), or a new one; stray temp and unlisted shard files removed."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(directory)
    if manifest is None:
        ours = [path for path in directory.iterdir() if _temporary(path) or _SHARD.match(path.name)]
        others = [path.name for path in directory.iterdir() if path not in ours]
        if others:
            raise ValueError(
                f"{directory} is not empty and holds no extraction ({', '.join(sorted(others)[:5])}): "
                "extract into a new or empty directory"
            )
        manifest = {
            "format": FORMAT,
            "settings": settings,
            "columns": None,
            "shards": [],
            "tokens": 0,
            "complete": False,
        }
    else:
        _check_settings(directory, manifest["settings"], settings)
    listed = {shard["file"] for shard in manifest["shards"]}
    for path in directory.iterdir():
        if _temporary(path) or (_SHARD.match(path.name) and path.name not in listed):
            path.unlink()  # a shard killed while being written, or written but never listed: it is written again
    if not (directory / MANIFEST).exists():
        _write_json(directory / MANIFEST, manifest)
    return manifest


# -- extracting ----------------------------------------------------------------------


def _rows(
    read: list[Tensor], axes: list[int], names: list[str], batch: dict[str, Tensor], documents: Tensor
) -> dict[str, Tensor]:
    """A batch's values as rows, one per real token, in (document, position) order, on the CPU, with the row columns."""
    mask = batch["attention_mask"].bool()
    positions = batch["attention_mask"].cumsum(1) - 1
    documents = documents[:, None].expand_as(mask)
    rows = {
        DOCUMENT: documents[mask],
        POSITION: positions[mask],
        TOKEN: batch["input_ids"][mask],
    }
    for name, tensor, axis in zip(names, read, axes):
        tensor = tensor.movedim(axis, 1)
        rows[name] = tensor[mask.to(tensor.device)].cpu()
    return rows


def _skipped(directory: Path, manifest: dict, stream: Iterator, texts: Any, batch_size: int) -> tuple[dict, Any, int]:
    """Read (and hash) the texts the directory's listed shards cover, refusing texts other than theirs; for a complete
    extraction, every text (and no more), checked against the whole run's count and digest.

    Returns where the run picks up (the last shard's ``resume``), the hasher and the texts read. Nothing is tokenized.
    """
    last: dict[str, Any] = (
        manifest["shards"][-1]["resume"] if manifest["shards"] else {"batch": 0, "row": 0, "texts_sha256": None}
    )
    hasher, consumed = hashlib.sha256(), 0
    if manifest["complete"]:
        whole = manifest["texts"]
        # a run before the digest was recorded: its last shard, ended by the stream's end, holds it
        recorded = manifest.get("texts_sha256") or (
            last["texts_sha256"] if last["batch"] * batch_size >= whole else None
        )
        for text in itertools.islice(stream, whole + 1):  # one past the run's end: more texts are other texts too
            _digest(hasher, text)
            consumed += 1
        if consumed != whole or (recorded is not None and hasher.hexdigest() != recorded):
            these = (
                f"{consumed} texts (sha256 {hasher.hexdigest()[:12]})"
                if consumed <= whole
                else f"more than {whole} texts"
            )
            raise InvalidArgument(
                "extract_values",
                "texts",
                texts,
                f"{directory} holds a complete extraction of {whole} texts (sha256 {str(recorded)[:12]}), "
                f"and these are {these}: other texts",
                "pass the texts it was extracted from to read it back (or load_activations(directory)), "
                "or extract these into a new directory",
            )
        return last, hasher, consumed
    covered = last["batch"] * batch_size
    for text in itertools.islice(stream, covered):
        _digest(hasher, text)
        consumed += 1
    if last["batch"] and (consumed < covered or hasher.hexdigest() != last["texts_sha256"]):
        problem = f"end after {consumed}" if consumed < covered else "differ from those"
        raise InvalidArgument(
            "extract_values",
            "texts",
            texts,
            f"the first {covered} texts {problem} the shards in {directory} were extracted from",
            "continue with the same texts, or extract into a new directory",
        )
    return last, hasher, consumed


@torch.no_grad()
def extract_values(
    model: StandardModel,
    texts: Iterable[str] | Iterable[Mapping[str, Any]] | str,
    values: str | Sequence[str],
    directory: str | os.PathLike,
    *,
    column: str = "text",
    batch_size: int = 8,
    max_length: int | None = None,
    shard_tokens: int = 2**15,
    dtype: torch.dtype | None = None,
    progress: bool = True,
    remote: bool | str = False,
    engine: str = "auto",
) -> ActivationShards:
    """Stream per-token standard values over any number of texts to safetensors shards in ``directory``; returns their reader.

    ``texts`` is any iterable of strings, or a ``datasets`` Dataset (any
    iterable of mappings) read at ``column``; it is consumed lazily, in order,
    ``batch_size`` at a time, so a generator or a streaming dataset works. A
    document may also be given as its token ids (a list of ints, a ``[seq]``
    int tensor, a pre-tokenized column): they are read as given (no special
    tokens added), cut to ``max_length``.
    ``values`` are standard names as ``cache_values`` takes them
    (``"layers.6.layer_output"``, ``"layers.*.mlp.mlp_output"``,
    ``"layers.2.self_attn.attention_head_outputs"``, ``"logits"``); each must
    have a token axis (``seq``): a row holds one token's value, its batch and
    token axes removed (``[hidden_size]``, ``[num_heads, head_dim]``).

    Each batch is tokenized alone (left-padded to its longest text, cut to
    ``max_length`` tokens when given) and its padding dropped; a shard holds
    ``shard_tokens`` rows (the last one fewer), with ``document`` (the text's
    index in the stream), ``position`` (the token's index in its text) and
    ``token`` (its id) per row. When no value is read after the blocks
    (``logits``), each forward ends after the last block a value needs.
    Floating values are cast to ``dtype`` when given (``torch.bfloat16``
    halves the disk). Memory: one batch, plus the shard buffer,
    ``shard_tokens`` times a row's bytes.

    Run again after an interruption with the same arguments, it skips the
    texts the listed shards cover (checking they are the same texts), runs
    again the batch the last shard ended in, and continues: the shards are
    those of an uninterrupted run, row for row. On a complete extraction of
    the same texts it returns that extraction without running the model (it
    reads the texts through, hashing them, to know they are the same). Every
    other directory holding an extraction is refused with ``InvalidArgument``
    before the model runs, naming what differs: another model, other values
    or other settings, or other texts (other ones, fewer or more than a
    complete run's); extract into a new directory instead. It runs the model
    itself, so it is refused inside an open trace (``ToolkitInsideTrace``).

    As in ``cache_values``, where every value is read at a module boundary
    each batch runs as a plain forward with hooks rather than a trace (the
    same rows bit for bit); ``engine="nnsight"`` forces the trace,
    ``engine="hooks"`` refuses a value that does not qualify, and the
    returned reader's ``engine`` and ``fallback`` say which ran and why.
    """
    function = "extract_values"
    _arguments.outside_trace(function)
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    shard_tokens = _arguments.count(shard_tokens, function=function, argument="shard_tokens")
    if max_length is not None:
        max_length = _arguments.count(max_length, function=function, argument="max_length")
    _check_dtype(dtype, function)
    _check_engine(engine, function)
    values = _arguments.names(values, function=function, argument="values")
    requested = expand_names(model, values, fresh_calls=True)  # every call is a fresh one
    axes = _token_axes(model, requested)
    directory = Path(directory)
    settings = {
        "model": str(getattr(model.config, "_name_or_path", "") or getattr(model, "repo_id", "")),
        "model_class": type(model._module).__name__,
        "values": requested,
        "column": column,
        "batch_size": batch_size,
        "max_length": max_length,
        "shard_tokens": shard_tokens,
        "dtype": _dtype_name(dtype),
    }
    hosts = [_host(model, name) for name in requested]
    stop = _stop_layer(model, requested)
    device = "cpu" if remote else None  # on the model's device until the padding is dropped
    reader = BatchReader(model, hosts, requested, stop, device, dtype, remote, engine)
    stream = _texts(texts, column)
    manifest = _prepare(directory, settings)
    last, hasher, consumed = _skipped(directory, manifest, stream, texts, batch_size)
    if manifest["complete"]:
        return ActivationShards(directory)

    shards = _Shards(directory, manifest)
    try:
        total = 1 if isinstance(texts, str) else len(texts)  # type: ignore[arg-type]
    except TypeError:
        total = None  # a generator or a streaming dataset
    bar = tqdm(total=total, initial=consumed, unit="text", desc="extract_values", disable=not progress)
    batch_index, tokens = last["batch"], manifest["tokens"]
    try:
        while chunk := list(itertools.islice(stream, batch_size)):
            digest = hasher.hexdigest()
            for text in chunk:
                _digest(hasher, text)
            consumed += len(chunk)
            shards.after_batch = (batch_index + 1, 0, hasher.hexdigest())
            if batch_index == last["batch"] and last["row"] and last.get("batch_sha256") != hasher.hexdigest():
                raise InvalidArgument(
                    function,
                    "texts",
                    texts,
                    f"texts {consumed - len(chunk)} to {consumed - 1} differ from those the last shard in {directory} was extracted from",
                    "continue with the same texts, or extract into a new directory",
                )
            ids = _tokenized(model, chunk, max_length)
            # a text with no tokens (an empty string) has no rows, and the model refuses a row without tokens
            documents = torch.tensor([index for index, row in enumerate(ids) if row], dtype=torch.long)
            documents += batch_index * batch_size
            if len(documents):
                # left-padded whatever side the tokenizer pads: each row's positions come from its mask
                batch = _arguments.prompts(
                    model, [row for row in ids if row], function=function, argument="texts"
                ).inputs
                with _arguments.left_padding(model):
                    read = reader(batch)
                rows = _rows(read, axes, requested, batch, documents)
                del read
                start = last["row"] if batch_index == last["batch"] else 0
                count = rows[DOCUMENT].shape[0]
                tokens += count - start
                while start < count:
                    start = shards.add(rows, start, batch_index, digest)
                del rows
            batch_index += 1
            bar.update(len(chunk))
            bar.set_postfix(tokens=tokens, refresh=False)
        shards.after_batch = (batch_index, 0, hasher.hexdigest())
        shards.commit(shards.after_batch, complete={"texts": consumed, "texts_sha256": hasher.hexdigest()})
    finally:
        bar.close()
    found = ActivationShards(directory)
    found.engine, found.fallback = reader.engine, reader.fallback
    return found


# -- reading -------------------------------------------------------------------------


class ActivationShards:
    """An extraction on disk, read shard by shard, batch by batch or row by row: what ``extract_values`` returns.

    Columns are the values' standard names, each row ``[*row shape]``
    (``columns`` gives dtype and row shape), and ``document``, ``position``,
    ``token`` (int64). Only the shards the manifest lists are read, so an
    extraction still running (or interrupted: ``complete`` is False) reads as
    far as it got. ``shards["layers.6.layer_output"]`` is one column over every
    shard as one ``[num_tokens, ...]`` tensor, for extractions that fit in memory::

        shards = load_activations("acts/")
        len(shards), shards.num_tokens, shards.num_texts
        for shard in shards: ...                     # {column: [shard tokens, ...]}
        for rows in shards.batches(4096): ...        # the same columns, 4096 rows at a time across shards
    """

    #: which path the ``extract_values`` call that returned this reader ran (``"hooks"`` or ``"nnsight"``), None when it ran none
    engine: str | None = None
    #: why that call traced rather than hooked (a value not at a module boundary...), else None
    fallback: str | None = None

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        manifest = _read_manifest(self.directory)
        if manifest is None:
            raise FileNotFoundError(
                f"{self.directory} holds no {MANIFEST}: it is no extraction (extract_values writes one)"
            )
        self.manifest = manifest

    @property
    def values(self) -> list[str]:
        """The standard names extracted, in forward order."""
        return list(self.manifest["settings"]["values"])

    @property
    def columns(self) -> dict[str, dict]:
        """Each column's ``{"dtype": "float32", "shape": [row shape]}``; empty before the first batch."""
        return dict(self.manifest.get("columns") or {})

    @property
    def complete(self) -> bool:
        return bool(self.manifest["complete"])

    @property
    def num_tokens(self) -> int:
        """The rows the listed shards hold."""
        return int(self.manifest["tokens"])

    @property
    def num_texts(self) -> int | None:
        """The texts read, padding-only ones included; None while the extraction is incomplete."""
        return self.manifest.get("texts")

    def __len__(self) -> int:
        return len(self.manifest["shards"])

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        return (self.shard(index) for index in range(len(self)))

    def _names(self, names: str | Sequence[str] | None) -> list[str]:
        known = [*self.values, *METADATA]
        if names is None:
            return known
        names = [names] if isinstance(names, str) else list(names)
        unknown = [name for name in names if name not in known]
        if unknown:
            raise KeyError(f"{', '.join(map(repr, unknown))} not extracted; the columns are {', '.join(known)}")
        return names

    def shard(self, index: int, names: str | Sequence[str] | None = None) -> dict[str, Tensor]:
        """Shard ``index``'s columns (all, or ``names``), ``[shard tokens, ...]`` each; only those asked for are read."""
        names = self._names(names)
        entry = self.manifest["shards"][index]
        with safe_open(str(self.directory / entry["file"]), framework="pt") as file:
            return {name: file.get_tensor(name) for name in names}

    def batches(self, size: int, names: str | Sequence[str] | None = None) -> Iterator[dict[str, Tensor]]:
        """The rows in order, ``size`` at a time (the last batch fewer), across shard boundaries; one shard in memory at a time."""
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"size={size!r}: pass a positive number of rows")
        names = self._names(names)
        pending: list[dict[str, Tensor]] = []
        held = 0
        for index in range(len(self)):
            shard = self.shard(index, names)
            count = shard[names[0]].shape[0]
            start = 0
            while start < count:
                take = min(size - held, count - start)
                pending.append({name: tensor[start : start + take] for name, tensor in shard.items()})
                held, start = held + take, start + take
                if held == size:
                    yield _joined(pending, names)
                    pending, held = [], 0
        if pending:
            yield _joined(pending, names)

    def rows(self, names: str | Sequence[str] | None = None) -> Iterator[dict[str, Tensor]]:
        """One dict per token: each column's row (``[*row shape]``; ``document``, ``position``, ``token`` as 0-d tensors)."""
        for shard in (self.shard(index, names) for index in range(len(self))):
            columns = list(shard.items())
            for row in range(columns[0][1].shape[0]):
                yield {name: tensor[row] for name, tensor in columns}

    def __getitem__(self, name: str) -> Tensor:
        """One column over every shard, ``[num_tokens, ...]``, filled shard by shard (no second copy)."""
        (name,) = self._names([name])
        if not self.manifest["shards"]:
            raise KeyError(f"{self.directory} has no shard yet: nothing to read for {name!r}")
        out: Tensor | None = None
        offset = 0
        for index in range(len(self)):
            part = self.shard(index, [name])[name]
            if out is None:
                out = torch.empty((self.num_tokens, *part.shape[1:]), dtype=part.dtype)
            out[offset : offset + part.shape[0]] = part
            offset += part.shape[0]
        return cast(Tensor, out)  # set by the first shard, and there is one (checked above)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return (
            f"ActivationShards({str(self.directory)!r}, {len(self)} shards, {self.num_tokens} tokens, {state}, "
            f"values={self.values})"
        )


def _joined(pieces: list[dict[str, Tensor]], names: list[str]) -> dict[str, Tensor]:
    if len(pieces) == 1:
        return {name: pieces[0][name].clone() for name in names}
    return {name: torch.cat([piece[name] for piece in pieces]) for name in names}


def load_activations(directory: str | os.PathLike) -> ActivationShards:
    """The extraction in ``directory``, as ``extract_values`` wrote it (complete or not): an ``ActivationShards``."""
    return ActivationShards(directory)
