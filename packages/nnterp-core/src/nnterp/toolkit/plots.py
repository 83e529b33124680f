"""Heatmaps with token labels: a logit lens, a patching sweep, an attention pattern.

Each function draws one heatmap and either writes it as a PNG to ``path``
(and returns the path) or returns the matplotlib ``Figure`` for a notebook to
show. The figure is made without pyplot, so nothing is left open in pyplot's
global state and a notebook cell shows it once. The PNG is exactly
``figsize * dpi`` pixels (no tight cropping), so give both for a fixed size.

matplotlib is an optional dependency: ``pip install matplotlib``, or the
extra ``pip install 'nnterp-core[plots]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .tokens import token_labels

INSTALL = "nnterp's plots need matplotlib: pip install matplotlib (or the extra: pip install 'nnterp-core[plots]')"


def _figure(figsize: tuple[float, float], dpi: float) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(INSTALL) from error
    return Figure(figsize=figsize, dpi=dpi, layout="constrained")


def _show_token(token: str) -> str:
    """A token as a tick label: every unprintable character escaped (a font has no glyph for it), a blank token quoted."""
    shown = "".join(character if character.isprintable() else repr(character)[1:-1] for character in token)
    return repr(token) if not shown.strip() else shown


def _size(rows: int, columns: int, figsize: tuple[float, float] | None) -> tuple[float, float]:
    if figsize is not None:
        return figsize
    return (min(2.5 + 0.45 * columns, 30.0), min(1.8 + 0.4 * rows, 30.0))


def _finish(figure: Any, path: str | PathLike | None, dpi: float) -> Any:
    if path is None:
        return figure
    path = Path(path)
    figure.savefig(path, dpi=dpi, format="png")
    return path


def _heatmap(
    values: Tensor,
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    row_axis: str,
    column_axis: str,
    title: str | None,
    colorbar: str,
    cmap: str,
    vmin: float | None,
    vmax: float | None,
    annotations: list[list[str]] | None,
    figsize: tuple[float, float] | None,
    dpi: float,
    path: str | PathLike | None,
) -> Any:
    values = values.detach().float().cpu()
    figure = _figure(_size(len(rows), len(columns), figsize), dpi)
    axes = figure.add_subplot()
    image = axes.imshow(values.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    axes.set_xticks(range(len(columns)), [_show_token(label) for label in columns], rotation=90)
    axes.set_yticks(range(len(rows)), [_show_token(label) for label in rows])
    axes.set_xlabel(column_axis)
    axes.set_ylabel(row_axis)
    if title:
        axes.set_title(title)
    if annotations is not None:
        # dark text on the bright end of the scale, light on the dark end
        low, high = image.get_clim()
        for i, line in enumerate(annotations):
            for j, text in enumerate(line):
                bright = (float(values[i, j]) - low) / ((high - low) or 1.0) > 0.6
                color = "black" if bright else "white"
                axes.text(j, i, _show_token(text), ha="center", va="center", fontsize="x-small", color=color)
    figure.colorbar(image, ax=axes, label=colorbar)
    return _finish(figure, path, dpi)


def _symmetric(values: Tensor) -> float:
    finite = values[torch.isfinite(values)]
    bound = float(finite.abs().max()) if finite.numel() else 1.0
    return bound or 1.0


def plot_sweep(
    sweep: Any,
    path: str | PathLike | None = None,
    *,
    normalized: bool = False,
    title: str | None = None,
    cmap: str = "RdBu",
    figsize: tuple[float, float] | None = None,
    dpi: float = 100,
) -> Any:
    """Draw a patching ``Sweep`` as a heatmap: rows its first axis (layers), columns its second (positions or heads).

    Tick labels are the sweep's ``labels``; the colours are diverging and
    centred on 0, so a cell that changes nothing is white (with
    ``normalized=True`` it plots ``sweep.normalized()``: 0 = corrupted,
    1 = clean, the scale reaching at least 1). NaN cells stay blank.
    Writes a PNG to ``path`` and returns the path, else returns the Figure.
    """
    if normalized:
        sweep = sweep.normalized()
    values = sweep.values
    if values.dim() != 2:
        fix = (
            f"; select one index of an axis first, e.g. plot_sweep(sweep.select({sweep.axes[1]}=0))"
            if values.dim() > 2
            else ""
        )
        raise ValueError(f"plot_sweep draws a two-axis sweep; this one has axes {sweep.axes}{fix}")
    rows, columns = (sweep.labels[axis] for axis in sweep.axes)
    bound = max(_symmetric(values), 1.0) if normalized else _symmetric(values)
    where = f" ({sweep.site})" if getattr(sweep, "site", "") else ""
    return _heatmap(
        values, rows, columns, row_axis=sweep.axes[0], column_axis=sweep.axes[1],
        title=title if title is not None else f"patching{where}",
        colorbar="normalized metric" if normalized else "metric", cmap=cmap, vmin=-bound, vmax=bound,
        annotations=None, figsize=figsize, dpi=dpi, path=path,
    )  # fmt: skip


def plot_attention(
    pattern: Tensor,
    tokens: Sequence[str],
    path: str | PathLike | None = None,
    *,
    title: str | None = None,
    cmap: str = "Blues",
    figsize: tuple[float, float] | None = None,
    dpi: float = 100,
) -> Any:
    """Draw one attention pattern ``[query, key]`` as a heatmap, queries down, keys across, both labelled with ``tokens``.

    Take one prompt and head of ``attention_probabilities`` first
    (``pattern[0, head]``). Colours run from 0 to 1. Writes a PNG to ``path``
    and returns the path, else returns the Figure.
    """
    pattern = torch.as_tensor(pattern)
    if pattern.dim() != 2:
        raise ValueError(
            f"plot_attention draws one [query, key] pattern; this one has shape {tuple(pattern.shape)} "
            "(take one prompt and head: pattern[0, head])"
        )
    if pattern.shape[1] != len(tokens) or pattern.shape[0] > len(tokens):
        raise ValueError(
            f"a pattern of shape {tuple(pattern.shape)} with {len(tokens)} tokens: the key axis must have one per token"
        )
    queries = list(tokens)[-pattern.shape[0] :]
    return _heatmap(
        pattern, queries, list(tokens), row_axis="query", column_axis="key", title=title,
        colorbar="attention", cmap=cmap, vmin=0.0, vmax=1.0, annotations=None,
        figsize=figsize, dpi=dpi, path=path,
    )  # fmt: skip


def _lens_tensor(result: Any) -> Tensor:
    if isinstance(result, Tensor):
        return result
    for name in ("probs", "probabilities", "values"):
        value = getattr(result, name, None)
        if isinstance(value, Tensor):
            return value
    return torch.as_tensor(result)


def plot_logit_lens(
    probs_or_lens_result: Any,
    tokens: Sequence[str] | None,
    path: str | PathLike | None = None,
    *,
    tokenizer: Any = None,
    layer_labels: Sequence[str] | None = None,
    title: str | None = None,
    cmap: str = "viridis",
    figsize: tuple[float, float] | None = None,
    dpi: float = 100,
) -> Any:
    """Draw a logit lens as a ``[layer, position]`` heatmap, positions labelled with the prompt's ``tokens``.

    ``probs_or_lens_result`` is one prompt's lens: probabilities ``[layers,
    seq, vocab_size]`` (each cell coloured by its top token's probability,
    and, given ``tokenizer``, annotated with that token), or a value per cell
    ``[layers, seq]`` (a target token's probability, say); a leading batch
    axis of one is dropped. A result object is read through its ``probs``
    (or ``probabilities``, ``values``) tensor, and its ``tokens`` when
    ``tokens`` is None. Rows are labelled 0, 1, ... unless ``layer_labels``
    says otherwise. Writes a PNG to ``path`` and returns the path, else
    returns the Figure.
    """
    values = _lens_tensor(probs_or_lens_result).detach().float().cpu()
    if tokens is None:
        tokens = getattr(probs_or_lens_result, "tokens", None)
        if tokens is None:
            raise ValueError("plot_logit_lens needs the prompt's tokens to label the positions")
    tokens = list(tokens)
    # a batch of one: [1, layers, seq, vocab_size], or [1, layers, seq]
    if (values.dim() == 4 and values.shape[0] == 1) or (
        values.dim() == 3 and values.shape[0] == 1 and values.shape[-1] == len(tokens) != values.shape[1]
    ):
        values = values[0]
    annotations = None
    if values.dim() == 3:
        top, ids = values.max(dim=-1)
        if tokenizer is not None:
            annotations = [token_labels(tokenizer, row) for row in ids]
        values, colorbar = top, "top token probability"
    elif values.dim() == 2:
        colorbar = "value"
    else:
        raise ValueError(
            f"plot_logit_lens draws one prompt's lens, [layers, seq, vocab_size] or [layers, seq]; got shape {tuple(values.shape)}"
        )
    if values.shape[1] != len(tokens):
        raise ValueError(f"the lens has {values.shape[1]} positions but {len(tokens)} tokens were given")
    rows = list(layer_labels) if layer_labels is not None else [str(i) for i in range(values.shape[0])]
    if len(rows) != values.shape[0]:
        raise ValueError(f"{len(rows)} layer labels for {values.shape[0]} rows")
    return _heatmap(
        values, rows, tokens, row_axis="layer", column_axis="position", title=title if title is not None else "logit lens",
        colorbar=colorbar, cmap=cmap, vmin=0.0 if colorbar != "value" else None, vmax=1.0 if colorbar != "value" else None,
        annotations=annotations, figsize=figsize, dpi=dpi, path=path,
    )  # fmt: skip
