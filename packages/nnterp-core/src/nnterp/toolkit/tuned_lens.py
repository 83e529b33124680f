"""A tuned lens (Belrose et al. 2023): per stream an affine translator, trained so that its lens predicts what the model predicts.

Each stream the logit lens reads (block 0's ``layer_input``, then every
block's ``layer_output``) gets its own translator ``h + h @ weight[r].T +
bias[r]``, the affine map ``A_r h + b_r`` with ``A_r = I + weight[r]``,
starting at the identity (``weight`` and ``bias`` zero, where the tuned lens is
the logit lens exactly). Training lowers ``KL(final || lens)``, the model's
own next-token distribution against ``softmax(project_on_vocab(translator(h)))``,
averaged over the real tokens of the training texts, each row by itself. The
last block's translator stays the identity: its lens is the model's own
prediction. Only standard values and ``model.project_on_vocab`` are read, so
it trains and runs on every family the logit lens does.

A lens is saved as a folder: ``config.json`` (the model it was trained on,
its sizes, the training settings and losses) and ``params.safetensors``
(``weight`` ``[num_layers + 1, hidden_size, hidden_size]``, ``bias``
``[num_layers + 1, hidden_size]``, float32, row 0 the embeddings).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..protocols import StandardModel
from . import _arguments
from .lens import Positions, _lens, _streams

__all__ = ["TunedLens", "tuned_lens"]

CONFIG = "config.json"
WEIGHTS = "params.safetensors"
FORMAT = "nnterp.tuned_lens"


def _model_name(model: StandardModel) -> str:
    return str(getattr(model.config, "_name_or_path", "") or getattr(model, "repo_id", ""))


@dataclass
class TunedLens:
    """One affine translator per stream, row 0 the embeddings (block 0's ``layer_input``), row ``i + 1`` block ``i``'s ``layer_output``.

    ``weight`` ``[num_layers + 1, hidden_size, hidden_size]`` and ``bias``
    ``[num_layers + 1, hidden_size]`` (float32, on the CPU) give row ``r``'s
    translator ``h + h @ weight[r].T + bias[r]``; the last row is zero, the
    identity. Build one with `TunedLens.train` (or `TunedLens.identity`),
    apply it with `tuned_lens`. ``model``/``model_class``/``hidden_size``/
    ``num_layers`` say what it was trained on; ``history`` holds each step's
    mean KL over the trained rows, ``settings`` how it was trained.
    """

    weight: Tensor
    bias: Tensor
    model: str
    model_class: str
    hidden_size: int
    num_layers: int
    history: list[float] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    # -- building --------------------------------------------------------------------

    @classmethod
    def identity(cls, model: StandardModel) -> TunedLens:
        """The untrained lens of ``model``: every translator the identity, so `tuned_lens` is `logit_lens` exactly."""
        rows, hidden = model.num_layers + 1, model.hidden_size
        return cls(
            torch.zeros(rows, hidden, hidden),
            torch.zeros(rows, hidden),
            _model_name(model),
            type(model._module).__name__,
            hidden,
            model.num_layers,
        )

    @classmethod
    def train(
        cls,
        model: StandardModel,
        texts: Any,
        *,
        steps: int = 250,
        lr: float = 1e-3,
        batch_size: int = 8,
        max_length: int | None = None,
        progress: bool = True,
        remote: bool | str = False,
        engine: str = "auto",
    ) -> TunedLens:
        """Train a lens on ``model``'s own activations over ``texts``: ``steps`` Adam steps of ``lr``, each on ``batch_size`` texts.

        ``texts`` are prompts as the toolkit takes them (strings or token id
        lists), each cut to its first ``max_length`` tokens where given;
        batches go through them in order, round and round. Each step reads
        every stream and the last block's output with no gradient (on hooks
        where the logit lens can, ``engine`` as in `logit_lens`; ``remote=``
        reads them on the server), then, row by row, takes the gradient of
        ``KL(final || lens)`` averaged over the batch's real tokens, through
        the model's own final norm and ``lm_head`` (loaded here; their weights
        get no gradient). The last block's row is not trained: it stays the
        identity. Returns the lens, its ``history`` the mean KL of each step.
        """
        function = "TunedLens.train"
        _arguments.outside_trace(function)
        steps = _arguments.count(steps, function=function, argument="steps")
        batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
        if max_length is not None:
            max_length = _arguments.count(max_length, function=function, argument="max_length")
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
            raise _arguments.InvalidArgument(
                function, "lr", lr, "expected a learning rate above 0", "pass e.g. lr=1e-3"
            )
        texts = [texts] if isinstance(texts, str) else list(texts) if isinstance(texts, Sequence) else texts
        if not isinstance(texts, list) or not texts:
            raise _arguments.InvalidArgument(
                function, "texts", texts, "expected a non-empty list of texts (strings or token id lists)"
            )
        batches = [
            _arguments.prompts(model, texts[start : start + batch_size], function=function, argument="texts")
            for start in range(0, len(texts), batch_size)
        ]
        if max_length is not None:
            batches = [_cut(model, batch, max_length, function) for batch in batches]
        _arguments.loaded(model)
        lens = cls.identity(model)
        trained = model.num_layers  # rows 0 .. num_layers - 1; the last row stays the identity
        weight = torch.zeros(trained, model.hidden_size, model.hidden_size, requires_grad=True)
        bias = torch.zeros(trained, model.hidden_size, requires_grad=True)
        optimizer = torch.optim.Adam([weight, bias], lr=lr)
        bar = tqdm(range(steps), desc="tuned lens", disable=not progress)
        for step in bar:
            batch = batches[step % len(batches)]
            streams = _streams(model, batch, engine, remote, embeddings=True)
            # whole rows (the stream's own layout, several streams included), the padding weighted out
            real = batch.attention_mask.to(streams[0].device, torch.float32)
            with torch.no_grad():
                final = model.project_on_vocab(streams[-1]).float().log_softmax(-1)
            gradients_w, gradients_b, losses = [], [], []
            for row in range(trained):
                with torch.enable_grad():
                    translated = _translate(streams[row], weight[row], bias[row])
                    lens_logp = model.project_on_vocab(translated).float().log_softmax(-1)
                    kl = ((final.exp() * (final - lens_logp)).sum(-1) * real).sum() / real.sum()
                    grad_w, grad_b = torch.autograd.grad(kl, [weight, bias])
                gradients_w.append(grad_w)
                gradients_b.append(grad_b)
                losses.append(kl.item())
            optimizer.zero_grad()
            weight.grad = torch.stack(gradients_w).sum(0)
            bias.grad = torch.stack(gradients_b).sum(0)
            optimizer.step()
            lens.history.append(sum(losses) / len(losses))
            bar.set_postfix(kl=f"{lens.history[-1]:.4f}")
        lens.weight[:trained] = weight.detach()
        lens.bias[:trained] = bias.detach()
        lens.settings = {
            "steps": steps,
            "lr": lr,
            "batch_size": batch_size,
            "max_length": max_length,
            "texts": len(texts),
            "optimizer": "Adam",
        }
        return lens

    # -- applying ------------------------------------------------------------------

    def translate(self, row: int, hidden: Tensor) -> Tensor:
        """Row ``row``'s translator on ``hidden`` ``[..., hidden_size]``, in ``hidden``'s dtype and device (the last row returns it as it is)."""
        if row == self.num_layers:
            return hidden
        return _translate(hidden, self.weight[row], self.bias[row])

    def check(self, model: StandardModel, function: str, argument: str = "lens") -> None:
        """Refuse ``model`` where it is not the one this lens was trained on (another name or class, or other sizes)."""
        sizes = (model.hidden_size, model.num_layers)
        if sizes != (self.hidden_size, self.num_layers):
            raise _arguments.InvalidArgument(
                function, argument, f"a lens of {self.model!r}",
                f"it was trained on hidden_size={self.hidden_size}, num_layers={self.num_layers}, and this model has "
                f"hidden_size={sizes[0]}, num_layers={sizes[1]}",
                "train a lens on this model (TunedLens.train) or load the one trained on it",
            )  # fmt: skip
        name, cls = _model_name(model), type(model._module).__name__
        if (name, cls) != (self.model, self.model_class):
            raise _arguments.InvalidArgument(
                function, argument, f"a lens of {self.model!r}",
                f"it was trained on {self.model!r} ({self.model_class}), and this model is {name!r} ({cls})",
                "train a lens on this model, or pass strict=False to TunedLens.load to use it anyway (a copy of the same weights, say)",
            )  # fmt: skip

    # -- saving --------------------------------------------------------------------

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the lens to ``directory`` (made if missing): ``config.json`` and ``params.safetensors``; returns its path."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({"weight": self.weight.contiguous(), "bias": self.bias.contiguous()}, str(directory / WEIGHTS))
        config = {
            "format": FORMAT,
            "version": 1,
            "model": self.model,
            "model_class": self.model_class,
            "hidden_size": self.hidden_size,
            "num_layers": self.num_layers,
            "rows": "0: layers[0].layer_input (the embeddings); i + 1: layers[i].layer_output; the last is the identity",
            "translator": "h + h @ weight[row].T + bias[row]",
            "settings": self.settings,
            "history": self.history,
        }
        (directory / CONFIG).write_text(json.dumps(config, indent=1))
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike, model: StandardModel, *, strict: bool = True) -> TunedLens:
        """A lens `save` wrote, checked against ``model``: its sizes always, its name and class unless ``strict=False``."""
        from safetensors.torch import load_file

        function = "TunedLens.load"
        directory = Path(directory)
        if not (directory / CONFIG).is_file() or not (directory / WEIGHTS).is_file():
            raise _arguments.InvalidArgument(
                function,
                "directory",
                str(directory),
                f"no {CONFIG} and {WEIGHTS} there",
                "give the folder TunedLens.save wrote",
            )
        config = json.loads((directory / CONFIG).read_text())
        if config.get("format") != FORMAT:
            raise _arguments.InvalidArgument(
                function,
                "directory",
                str(directory),
                f"{CONFIG} is not a {FORMAT} config",
                "give the folder TunedLens.save wrote",
            )
        weights = load_file(str(directory / WEIGHTS))
        lens = cls(
            weights["weight"], weights["bias"], config["model"], config["model_class"], config["hidden_size"], config["num_layers"],
            list(config.get("history", [])), dict(config.get("settings", {})),
        )  # fmt: skip
        rows, hidden = lens.num_layers + 1, lens.hidden_size
        if tuple(lens.weight.shape) != (rows, hidden, hidden) or tuple(lens.bias.shape) != (rows, hidden):
            raise _arguments.InvalidArgument(
                function, "directory", str(directory),
                f"{WEIGHTS} holds weight {list(lens.weight.shape)} and bias {list(lens.bias.shape)}, "
                f"not the [{rows}, {hidden}, {hidden}] and [{rows}, {hidden}] its config says", "save the lens again",
            )  # fmt: skip
        try:
            lens.check(model, function, "model")
        except _arguments.InvalidArgument:
            if strict or (model.hidden_size, model.num_layers) != (hidden, lens.num_layers):
                raise
        return lens


def _translate(hidden: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``hidden + hidden @ weight.T + bias`` in ``hidden``'s dtype and device (the translator's weights cast to them)."""
    weight = weight.to(device=hidden.device, dtype=hidden.dtype)
    bias = bias.to(device=hidden.device, dtype=hidden.dtype)
    return hidden + (hidden @ weight.T + bias)


def _cut(model: StandardModel, batch: _arguments.Batch, max_length: int, function: str) -> _arguments.Batch:
    """``batch`` with each prompt cut to its first ``max_length`` tokens (left-padded again)."""
    rows = [ids[mask.bool()][:max_length].tolist() for ids, mask in zip(batch.input_ids, batch.attention_mask)]
    return _arguments.prompts(model, rows, function=function, argument="texts")


@torch.no_grad()
def tuned_lens(
    model: StandardModel,
    prompts: Any,
    lens: TunedLens,
    *,
    output: str = "probs",
    embeddings: bool = False,
    positions: Positions = None,
    remote: bool | str = False,
    engine: str = "auto",
) -> Tensor:
    """What each block's stream predicts through its trained translator: ``softmax(project_on_vocab(translator(layer_output)))``.

    The layout of `logit_lens`: ``[batch, num_layers, seq, vocab_size]``
    (``num_layers + 1`` rows with ``embeddings=True``, row 0 the embeddings'
    translator; ``positions`` as there), probabilities or, with
    ``output="logits"``, the projections themselves. The last row is the
    model's own prediction; an identity lens gives `logit_lens` exactly.
    A lens of other sizes (``hidden_size``, ``num_layers``) is refused before
    the model runs; `TunedLens.load` checks the model's name and class too.
    """
    function = "tuned_lens"
    if not isinstance(lens, TunedLens):
        raise _arguments.InvalidArgument(
            function, "lens", lens, "expected a TunedLens", "train one (TunedLens.train) or load one (TunedLens.load)"
        )
    if (model.hidden_size, model.num_layers) != (lens.hidden_size, lens.num_layers):
        lens.check(model, function)
    offset = 0 if embeddings is True else 1  # the lens's row of the result's first row
    lensed = _lens(
        model, prompts, function, output=output, embeddings=embeddings, inverse=False, positions=positions, remote=remote, engine=engine,
        translate=lambda row, hidden: lens.translate(row + offset, hidden),
    )  # fmt: skip
    return cast(Tensor, lensed)  # inverse=False: one tensor
