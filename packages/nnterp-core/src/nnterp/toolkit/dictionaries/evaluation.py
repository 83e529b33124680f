"""How well a dictionary reconstructs its value and what splicing it in costs the model's next-token loss."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import nnsight

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ...errors import InvalidArgument
from ...protocols import StandardModel
from .. import _arguments
from ..cache import _host
from . import _inputs
from ._inputs import Prompts
from .dictionary import Dictionary
from .splicing import splice


@dataclass(frozen=True)
class DictionaryEvaluation:
    """How well a dictionary reconstructs its value on a set of prompts, and what splicing it in costs the model.

    Over the real (non-padding) tokens: ``mse`` is the mean over tokens and
    ``d_out`` of ``(forward(x) - value)**2``; ``explained_variance`` is
    ``1 - sum ||value - forward(x)||^2 / sum ||value - mean||^2`` (the mean over
    all tokens); ``l0`` the mean number of active (non-zero) features per
    token. The losses are the mean next-token cross-entropy over the
    positions whose token and next token are both real: ``clean_loss`` of the
    plain model, ``spliced_loss`` with ``forward(x)`` in place of the value
    (no error term), ``ablated_loss`` with the value replaced by zeros or by
    its mean (``ablation``). ``tokens`` and ``predictions`` count both sets.
    """

    mse: float
    explained_variance: float
    l0: float
    clean_loss: float
    spliced_loss: float
    ablated_loss: float
    ablation: str
    tokens: int
    predictions: int

    @property
    def ce_loss_recovered(self) -> float:
        """``(ablated_loss - spliced_loss) / (ablated_loss - clean_loss)``: 1 when splicing costs nothing, 0 as bad as ablating."""
        gap = self.ablated_loss - self.clean_loss
        if gap == 0:
            raise ValueError(
                "ablating the value leaves the loss unchanged, so the loss recovered has no gap to measure against"
            )
        return (self.ablated_loss - self.spliced_loss) / gap

    @property
    def ce_loss_increase(self) -> float:
        """``spliced_loss - clean_loss``: what splicing the reconstruction in costs, in nats per token."""
        return self.spliced_loss - self.clean_loss


def _next_token_loss(logits: Tensor, batch: dict[str, Tensor]) -> Tensor:
    """The summed next-token cross-entropy and the number of predictions, ``[2]`` (float64), over positions whose token and next are real."""
    ids = batch["input_ids"].to(logits.device)
    mask = batch["attention_mask"].to(logits.device).bool()
    scored = mask[:, :-1] & mask[:, 1:]
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].float().flatten(0, 1), ids[:, 1:].flatten(), reduction="none"
    )
    return torch.stack([losses[scored.flatten()].double().sum(), scored.sum().double()]).cpu()


@torch.no_grad()
def evaluate_dictionary(
    model: StandardModel,
    dictionary: Dictionary,
    prompts: Prompts,
    *,
    ablation: str = "zero",
    batch_size: int = 8,
    progress: bool = True,
    remote: bool | str = False,
) -> DictionaryEvaluation:
    """Reconstruction error, sparsity and the next-token loss with the dictionary spliced in, on ``prompts``: a ``DictionaryEvaluation``.

    Per batch: one clean trace (the value, its reconstruction, the clean
    loss), one with ``forward(x)`` written in place of the value; then one
    per batch with the value ablated (``ablation="zero"``, or ``"mean"``: the
    value's mean over every real token of the prompts). ``ce_loss_recovered``
    compares the three losses.
    """
    function = "evaluate_dictionary"
    _arguments.outside_trace(function)
    if ablation not in ("zero", "mean"):
        raise InvalidArgument(function, "ablation", ablation, "expected 'zero' or 'mean'")
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    reads, writes = dictionary.sites(model, function=function)
    batches = _inputs.in_batches(_inputs.as_batch(model, prompts, function), batch_size)
    bar = tqdm(total=3 * len(batches), desc="evaluate_dictionary", disable=not progress)
    totals = torch.zeros(4, dtype=torch.float64)  # squared error, active features, tokens, squared value norms
    value_sum = torch.zeros(dictionary.d_out, dtype=torch.float64)
    clean = torch.zeros(2, dtype=torch.float64)
    spliced = torch.zeros(2, dtype=torch.float64)
    for batch in batches:
        out: list[Tensor] = []
        with _arguments.left_padding(model), model.trace(batch, remote=remote):
            nnsight.save(out)
            reader, read_name = _host(model, reads)
            x = getattr(reader, read_name)
            writer, write_name = _host(model, writes)
            target = x if writes == reads else getattr(writer, write_name)
            local = dictionary._on(x.device)
            features = local.encode(x)
            recon = local._output(features, x)
            real = batch["attention_mask"].to(x.device).bool()
            value = target.to(recon.dtype)[real].double()
            error = (recon[real].double() - value).pow(2).sum()
            active = (features[real] != 0).sum().double()
            out.append(torch.stack([error, active, real.sum().double(), value.pow(2).sum()]).cpu())
            out.append(value.sum(0).cpu())
            out.append(_next_token_loss(model.logits, batch))
        totals += out[0]
        value_sum += out[1]
        clean += out[2]
        bar.update()
        spliced += _loss_with(model, batch, remote, lambda: splice(model, dictionary))
        bar.update()
    tokens = int(totals[2])
    mean = value_sum / tokens
    ablated = torch.zeros(2, dtype=torch.float64)
    for batch in batches:
        ablated += _loss_with(
            model, batch, remote, lambda: _ablate(model, writes, mean if ablation == "mean" else None)
        )
        bar.update()
    bar.close()
    variance = totals[3] - tokens * mean.pow(2).sum()
    return DictionaryEvaluation(
        mse=float(totals[0] / (tokens * dictionary.d_out)),
        explained_variance=float(1 - totals[0] / variance),
        l0=float(totals[1] / tokens),
        clean_loss=float(clean[0] / clean[1]),
        spliced_loss=float(spliced[0] / spliced[1]),
        ablated_loss=float(ablated[0] / ablated[1]),
        ablation=ablation,
        tokens=tokens,
        predictions=int(clean[1]),
    )


def _loss_with(
    model: StandardModel, batch: dict[str, Tensor], remote: bool | str, intervene: Callable[[], Any]
) -> Tensor:
    """The summed next-token loss and the prediction count of one trace of ``batch`` under ``intervene()``."""
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch, remote=remote):
        nnsight.save(out)
        intervene()
        out.append(_next_token_loss(model.logits, batch))
    return out[0]


def _ablate(model: StandardModel, site: str, mean: Tensor | None) -> None:
    """Write zeros (or ``mean`` at every position) in place of ``site``; inside a trace."""
    host, name = _host(model, site)
    value = getattr(host, name)
    replaced = (
        torch.zeros_like(value)
        if mean is None
        else mean.to(device=value.device, dtype=value.dtype).expand_as(value).clone()
    )
    setattr(host, name, replaced)
