"""A block's contribution split for direct logit attribution: the MLP's per neuron or per expert, the attention's per head.

Each split returns logits, not vectors: ``readout.read(vectors)`` takes
vectors of the stream through the frozen final norm to the unembedding rows,
and a neuron's term is its activation times the read of its row of the down
projection, so no ``[neurons, prompts, hidden]`` tensor is ever made.

Where a norm follows the sublayer before its output is added (a sandwich
block's ``post_feedforward_layernorm`` or ``post_attention_layernorm``: the
contribution is the norm's output), the norm is applied with its per-token
scale frozen at the one the model used on the sublayer's raw output, as the
final norm is: linear, so the terms plus the norm's bias add up to the
contribution exactly (``post_norm``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..components.moe import Moe, no_shared_expert
from ..errors import Unavailable
from ..protocols import StandardModel
from ._hooks import boundary

#: the down projection's input units run through it at once when its matrix is read
CHUNK = 1024


@dataclass(frozen=True)
class Readout:
    """The frozen final norm and the unembedding rows of the attributed tokens: what a stream vector adds to the logit."""

    shape: Callable[[Tensor], Tensor]  # weight * center(x), the same at every token
    factor: Tensor  # [prompts, (seq,) 1]: the per-token 1 / scale
    rows: Tensor  # [prompts, (seq,) hidden]: the unembedding rows

    def read(self, vectors: Tensor) -> Tensor:
        """Each vector's direct effect on the unembedded logit, ``[..., prompts, (seq)]`` for ``[..., prompts, (seq,) hidden]``."""
        return (self.shape(vectors).to(self.rows.device) * self.factor.to(self.rows.device) * self.rows).sum(-1)


def is_mixture(model: StandardModel, index: int) -> bool:
    """Whether block ``index``'s MLP runs a mixture of experts."""
    mlp = model.layers[index].mlp
    return isinstance(mlp, Moe) and mlp.no_mixture() is None


def _matrix(module: torch.nn.Module, width: int) -> tuple[Tensor, Tensor]:
    """A linear module's matrix ``[width, out]`` (its input units' images, whatever layout it keeps its weight in) and its bias."""
    parameter = next(module.parameters())
    bias = module(torch.zeros(1, width, device=parameter.device, dtype=parameter.dtype)).float()[0]
    parts = []
    for start in range(0, width, CHUNK):
        count = min(CHUNK, width - start)
        units = torch.zeros(count, width, device=parameter.device, dtype=parameter.dtype)
        units[torch.arange(count), torch.arange(start, start + count)] = 1
        parts.append(module(units).float() - bias)
    return torch.cat(parts), bias


@dataclass(frozen=True)
class PostNorm:
    """The norm between a sublayer's raw output and its contribution, frozen at the raw output: ``shape(x) * factor + bias``."""

    shape: Callable[[Tensor], Tensor]
    factor: Tensor
    bias: Tensor
    label: str

    def apply(self, vectors: Tensor) -> Tensor:
        return self.shape(vectors) * self.factor.to(vectors.device)


#: the contribution each sublayer's split adds up to
CONTRIBUTION = {"mlp": "mlp_output", "self_attn": "attention_output"}


def post_norm(
    model: StandardModel, index: int, sublayer: str, raw: Tensor, total: Tensor, what: str
) -> PostNorm | None:
    """What turns a sublayer's raw output ``raw`` into its contribution ``total``: None where it is ``raw`` itself, else the post norm, frozen.

    ``sublayer`` is ``"mlp"`` (``mlp_output``) or ``"self_attn"``
    (``attention_output``); ``what`` names the raw output in the refusal. The
    post norm is the module whose output the contribution is read at, where
    that is not the sublayer itself (a sandwich block's
    ``post_feedforward_layernorm`` or ``post_attention_layernorm``); its
    per-token scale is frozen at the one the model used on ``raw``, checked
    to give ``total``. Anything else between them (a scale, a view) refuses.
    """
    from .attribution import _frozen_norm

    host, value = getattr(model.layers[index], sublayer), CONTRIBUTION[sublayer]
    where = boundary(host, value)
    module = None if isinstance(where, str) or where.last != "output" else where.module

    def close(a: Tensor, b: Tensor) -> bool:
        return torch.allclose(a.to(b.device), b, rtol=1e-2, atol=1e-2 * float(b.abs().max()) + 1e-6)

    refusal = f"{value} is not {what} on this family, nor a norm of it (a scale or another operation follows), so its split is not linear"
    if module is None or module is host._module:
        if not close(raw, total):
            raise Unavailable(host, value, refusal)
        return None
    shape, factor, bias = _frozen_norm(module, raw, f"layers[{index}].{sublayer}")
    if not close(shape(raw) * factor + bias, total):
        raise Unavailable(host, value, refusal)
    names = [name for name, child in model.layers[index]._module.named_modules() if child is module]
    label = f"layers.{index}.{names[0]}.bias" if names else f"layers.{index}.{sublayer}.post_norm.bias"
    return PostNorm(shape, factor, bias, label)


def neuron_terms(
    model: StandardModel, index: int, neurons: Tensor, total: Tensor, readout: Readout
) -> tuple[Tensor, list[str]]:
    """Block ``index``'s ``mlp_output`` per neuron: ``[neurons + 1 (+ 1), prompts, (seq)]`` logits and their labels.

    Neuron ``n``'s term is ``mlp_neurons[..., n]`` times the read of row ``n``
    of the down projection (``down_proj``, whatever the family calls it);
    then the projection's bias, and a post norm's bias where one follows.
    ``neurons`` and ``total`` are the cached ``mlp_neurons`` and
    ``mlp_output`` at the attributed positions.
    """
    mlp = model.layers[index].mlp
    down = mlp.__dict__.get("down_proj")
    if down is None:
        raise Unavailable(
            mlp, "down_proj", "no down projection module on this MLP, so its neurons cannot be projected one by one"
        )
    activations = neurons.float()
    matrix, bias = _matrix(down._module, activations.shape[-1])
    matrix, bias = matrix.to(readout.rows.device), bias.to(readout.rows.device)
    activations = activations.to(readout.rows.device)
    raw = activations @ matrix + bias
    post = post_norm(model, index, "mlp", raw, total.float(), "down_proj(mlp_neurons)")
    rows = matrix if post is None else post.shape(matrix).to(matrix.device)
    scale = readout.factor.to(matrix.device) * (1 if post is None else post.factor.to(matrix.device))
    # each neuron's row read at every token: weight * center(row) . (token's unembedding row), then the frozen scales
    read_rows = torch.einsum("...h,nh->...n", readout.rows, readout.shape(rows).to(matrix.device))
    per_neuron = (activations * read_rows * scale).movedim(-1, 0)
    down_bias = bias.expand_as(raw) if post is None else post.apply(bias.expand_as(raw))
    parts, labels = (
        [per_neuron, readout.read(down_bias)[None]],
        [*(f"layers.{index}.mlp.neurons.{n}" for n in range(matrix.shape[0])), f"layers.{index}.mlp.down_proj.bias"],
    )
    if post is not None:
        parts.append(readout.read(post.bias.expand_as(raw))[None])
        labels.append(post.label)
    return torch.cat(parts), labels


def head_terms(
    model: StandardModel, index: int, heads: Tensor, total: Tensor, readout: Readout
) -> tuple[Tensor, list[str]]:
    """Block ``index``'s ``attention_output`` per head: ``[heads + 1 (+ 1), prompts, (seq)]`` logits and their labels.

    Head ``h``'s term is the read of its outputs through its slice of the
    output projection (``o_proj``), ``attention_head_outputs[..., h, :]``
    times rows ``h * head_dim ...`` of its matrix; then the projection's bias,
    and a post norm's bias where one follows. ``heads`` and ``total`` are the
    cached ``attention_head_outputs`` and ``attention_output`` at the
    attributed positions.
    """
    attention = model.layers[index].self_attn
    projection = attention.__dict__.get("o_proj")
    if projection is None:
        raise Unavailable(
            attention,
            "o_proj",
            "no o_proj module on this attention, so its heads' outputs cannot be projected one by one",
        )
    device = readout.rows.device
    count, width = heads.shape[-2], heads.shape[-1]
    matrix, bias = _matrix(projection._module, count * width)
    matrix, bias = matrix.to(device).view(count, width, -1), bias.to(device)
    per_head = torch.einsum("...jd,jdh->j...h", heads.float().to(device), matrix)
    raw = per_head.sum(0) + bias
    post = post_norm(model, index, "self_attn", raw, total.float().to(device), "o_proj(attention_head_outputs)")
    vectors = [per_head, bias.expand_as(raw)[None]]
    parts = [readout.read(v if post is None else post.apply(v)) for v in vectors]
    labels = [*(f"layers.{index}.self_attn.heads.{h}" for h in range(count)), f"layers.{index}.self_attn.o_proj.bias"]
    if post is not None:
        parts.append(readout.read(post.bias.expand_as(raw))[None])
        labels.append(post.label)
    return torch.cat(parts), labels


def expert_terms(
    model: StandardModel,
    index: int,
    outputs: Tensor,
    indices: Tensor,
    shared: Tensor | None,
    total: Tensor,
    readout: Readout,
) -> tuple[Tensor, list[str]]:
    """Block ``index``'s ``mlp_output`` per expert: ``[num_experts (+ 1) (+ 1), prompts, (seq)]`` logits and their labels.

    Expert ``e``'s term is the read of its weighted output as it enters the
    mixture's sum: ``expert_outputs`` summed over the slots whose
    ``expert_indices`` is ``e`` (zero where no slot runs it); then the shared
    expert's (``shared_expert_output``), and a post norm's bias where one follows.
    """
    mlp = model.layers[index].mlp
    device = readout.rows.device
    outputs = outputs.float().to(device)
    chosen = torch.nn.functional.one_hot(indices.long().to(device), mlp.num_experts).float()
    shares = torch.einsum("...kh,...ke->e...h", outputs, chosen)
    raw = shares.sum(0) + (0 if shared is None else shared.float().to(device))
    post = post_norm(model, index, "mlp", raw, total.float(), "the experts' weighted outputs plus the shared expert's")
    vectors = [shares] if shared is None else [shares, shared.float().to(device)[None]]
    labels = [f"layers.{index}.mlp.experts.{e}" for e in range(mlp.num_experts)]
    labels += [] if shared is None else [f"layers.{index}.mlp.shared_experts"]
    parts = [readout.read(v if post is None else post.apply(v)) for v in vectors]
    if post is not None:
        parts.append(readout.read(post.bias.expand_as(raw))[None])
        labels.append(post.label)
    return torch.cat(parts), labels


def has_shared_expert(model: StandardModel, index: int) -> bool:
    return no_shared_expert(model.layers[index].mlp) is None
