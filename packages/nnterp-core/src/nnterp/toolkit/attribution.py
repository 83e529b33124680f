"""The residual stream taken apart: accumulated, decomposed into contributions, and attributed to logits.

Transformer-lens's ``accumulated_resid``, ``decompose_resid`` and
``logit_attrs``, on a ``ValueCache`` of standard values. They rest on the
contribution identity every family the kit passes satisfies::

    layer_input + sum(layers[i].contributions()) == layer_output

(``self_attn.attention_output + mlp.mlp_output`` on most blocks; a rescaled
residual's or a per-layer input's terms beside them where a block has them), so
the stream leaving the last block is the embedding stream
(``layers.0.layer_input``) plus every block's terms, on sequential, parallel,
sandwich and rescaling blocks alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..errors import Unavailable
from ..protocols import StandardModel
from . import _arguments
from .cache import CONTRIBUTIONS, ValueCache

#: what ``cache_values`` must read for ``accumulated_resid``
ACCUMULATED_RESID = ("layers.0.layer_input", "layers.*.layer_output")
#: what ``cache_values`` must read for ``decompose_resid``: the embedding stream and every term each block adds (its
#: ``contributions()``); add ``"layers.-1.layer_output"`` for ``direct_logit_attribution``
DECOMPOSE_RESID = ("layers.0.layer_input", f"layers.*.{CONTRIBUTIONS}")
#: what ``direct_logit_attribution(..., heads=True)`` needs besides ``DECOMPOSE_RESID``
HEAD_OUTPUTS = ("layers.*.self_attn.attention_head_outputs",)
#: what ``direct_logit_attribution(..., neurons=True)`` needs besides ``DECOMPOSE_RESID``
NEURONS = ("layers.*.mlp.mlp_neurons",)
#: what ``direct_logit_attribution(..., experts=True)`` needs besides ``DECOMPOSE_RESID`` (and
#: ``layers.*.mlp.shared_expert_output`` where the mixture has a shared expert)
EXPERTS = ("layers.*.mlp.expert_outputs", "layers.*.mlp.expert_indices")

EMBEDDINGS = "layers.0.layer_input"
#: a block's terms where the cache does not record its own: the attention's and the MLP's contributions
TWO_CONTRIBUTIONS = ("self_attn.attention_output", "mlp.mlp_output")
#: the label of the terms no contribution owns: the final norm's bias and the unembedding's, through the unembedding
BIAS = "bias"


class Components(NamedTuple):
    """Tensors stacked along a first axis, one per label: ``values[i]`` is ``labels[i]``'s. Unpacks as ``values, labels``."""

    values: Tensor
    labels: list[str]


class Attribution(NamedTuple):
    """Direct logit attributions: ``values[i]`` is ``labels[i]``'s share of ``logits``, and ``values.sum(0) == logits``."""

    values: Tensor
    labels: list[str]
    logits: Tensor


def _need(cache: ValueCache, name: str, names: Sequence[str]) -> Tensor:
    try:
        return cache[name]
    except KeyError:
        raise KeyError(
            f"{name} is not in the cache: cache_values(model, prompts, {list(names)!r}) reads what this needs"
        ) from None


def accumulated_resid(cache: ValueCache) -> Tensor:
    """The residual stream at every block boundary, ``[num_layers + 1, prompts, seq, hidden_size]``.

    Row 0 is the embedding stream (``layers.0.layer_input``, as the first
    block receives it, after any embedding scale), row ``i + 1`` the stream
    leaving block ``i`` (``layers.i.layer_output``). Needs ``ACCUMULATED_RESID``
    cached.
    """
    first = _need(cache, EMBEDDINGS, ACCUMULATED_RESID)
    rest = [_need(cache, f"layers.{index}.layer_output", ACCUMULATED_RESID) for index in range(cache.num_layers)]
    return torch.stack([first, *rest])


def decompose_resid(cache: ValueCache) -> Components:
    """The final residual stream as a sum of terms: ``values`` is ``[terms, prompts, seq, hidden_size]``.

    The embedding stream, then each block's terms in the order it adds them
    (``Layer.contributions()``, recorded by ``cache_values``), labelled by
    their standard names (``"layers.0.layer_input"``,
    ``"layers.0.self_attn.attention_output"``, ``"layers.0.mlp.mlp_output"``,
    ...): two per block on most families, more where a block rescales its
    stream (``layers.i.layer_input_rescaling``, Doge's, Beam's, ZAYA's;
    ``layers.i.layer_output_rescaling``, Gemma 4's) or adds a per-layer input
    (``layers.i.per_layer_input_output``), and a hybrid's recurrent blocks add
    ``linear_attn.attention_output``. By the contribution identity
    ``values.sum(0)`` is the stream leaving the last block (up to float
    rounding). On a parallel block both contributions read the same stream; on
    a sandwich block they are the post norms' outputs, what the block adds. A
    rescaling term is what the rescaling changes in the stream, so it depends
    on the stream before it (Gemma 4's on every earlier term). Needs
    ``DECOMPOSE_RESID`` cached.
    """
    labels = [EMBEDDINGS]
    for index in range(cache.num_layers):
        terms = cache.contributions.get(index, TWO_CONTRIBUTIONS)
        if not terms:
            raise Unavailable(
                f"layers[{index}]",
                "decompose_resid",
                "the block adds no terms to one stream: it carries several residual "
                "streams, which follow from their mixing (docs/streams.md), so the final stream is no sum of terms",
            )
        labels += [f"layers.{index}.{term}" for term in terms]
    return Components(torch.stack([_need(cache, label, DECOMPOSE_RESID) for label in labels]), labels)


# -- direct logit attribution ---------------------------------------------------------


def _frozen_norm(envoy: Any, stream: Tensor, where: str) -> tuple[Callable[[Tensor], Tensor], Tensor, Tensor]:
    """A norm with its per-token scale frozen at ``stream``'s: ``(shape, factor, bias)``, ``shape(stream) * factor + bias == norm(stream)``.

    ``shape`` is linear and the same at every token (``weight * center(x)``),
    ``factor`` (``[..., 1]``) the per-token ``1 / scale`` the model used on
    ``stream``, epsilon included. The norm is read as ``weight * center(x) /
    scale(x) + bias`` (LayerNorm, RMSNorm, Gemma's ``1 + weight``): the bias
    is ``norm(0)``, the centering is detected (does the norm ignore a
    constant shift?), ``weight * center(c)`` is the norm run on ``c`` blown
    up so far that its epsilon does not count, and the scale is what the
    model divided ``stream`` by. Everything goes through the norm module
    itself, so nothing is per family. ``envoy`` None is no norm (the
    identity).
    """
    if envoy is None:  # no norm: the stream is read as is
        return (
            (lambda contribution: contribution.float()),
            torch.ones(*stream.shape[:-1], 1, device=stream.device),
            torch.zeros(stream.shape[-1], device=stream.device),
        )
    module = envoy._module if hasattr(envoy, "_module") else envoy
    parameter = next(module.parameters(), None)
    device = parameter.device if parameter is not None else stream.device
    dtype = parameter.dtype if parameter is not None else stream.dtype

    def run(tensor: Tensor) -> Tensor:
        return module(tensor.to(device=device, dtype=dtype)).float()

    width = stream.shape[-1]
    bias = run(torch.zeros(1, width))[0]
    probe = torch.randn(1, width, generator=torch.Generator().manual_seed(0))
    normed = run(probe)
    centers = torch.allclose(run(probe + 3.0), normed, rtol=1e-2, atol=1e-2 * float(normed.abs().max()))

    def direction(tensor: Tensor) -> tuple[Tensor, Tensor]:
        # weight * center(t) / rms(center(t)), without epsilon; and rms(center(t))
        tensor = tensor.to(device).float()
        centered = tensor - tensor.mean(-1, keepdim=True) if centers else tensor
        size = centered.pow(2).mean(-1, keepdim=True).sqrt()
        safe = torch.where(size > 0, size, torch.ones_like(size))
        return (run(centered * (1e3 / safe)) - bias) * (size > 0), size

    applied = run(stream) - bias
    unit, size = direction(stream)
    # weight * center(stream) / scale(stream) == applied: the scale the model used, as a multiple of size
    ratio = applied.norm(dim=-1, keepdim=True) / unit.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    if not torch.allclose(unit * ratio, applied, rtol=1e-2, atol=1e-2 * float(applied.abs().max())):
        raise Unavailable(
            where,
            "direct_logit_attribution",
            "the norm is not a normalization followed by an elementwise scale and shift, so it has no per-token scale to freeze",
        )
    factor = ratio / size.clamp_min(1e-30)

    def shape(contribution: Tensor) -> Tensor:
        unit_c, size_c = direction(contribution)
        return unit_c * size_c

    return shape, factor, bias


def _token_ids(model: StandardModel, tokens: Any, shape: tuple[int, ...]) -> Tensor:
    """``tokens`` as ids broadcast to ``shape``: an id, a token string, or one per prompt (or per prompt and position)."""
    if isinstance(tokens, str):
        tokens = [tokens]
    if isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], str):
        each = []
        for token in tokens:
            encoded = model.tokenizer(token, add_special_tokens=False)["input_ids"]
            if len(encoded) != 1:
                raise ValueError(f"{token!r} is {len(encoded)} tokens, not one")
            each.append(encoded[0])
        tokens = each if len(each) > 1 else each[0]
    ids = torch.as_tensor(tokens, dtype=torch.long)
    if ids.ndim == 1 and len(shape) == 2 and ids.shape[0] == shape[0]:
        ids = ids[:, None]  # one token per prompt, at every position
    return ids.expand(shape)


@torch.no_grad()
def direct_logit_attribution(
    model: StandardModel,
    cache: ValueCache,
    tokens: int | str | Sequence[int] | Sequence[str] | Tensor,
    *,
    position: int | None = -1,
    heads: bool = False,
    neurons: bool = False,
    experts: bool = False,
    layers: Iterable[int] | None = None,
) -> Attribution:
    """Each contribution's direct effect on the logit of ``tokens``: ``values`` is ``[contributions + 1, prompts]``.

    The contributions are ``decompose_resid``'s (the embedding stream, each
    block's terms); the last row, ``"bias"``, holds what no contribution
    owns (the final norm's and the unembedding's biases). ``position`` is
    the sequence position (``-1``, every prompt's last token, the prompts
    being left-padded; out of range refused), or ``None`` for every position:
    ``[contributions + 1, prompts, seq]``. ``tokens`` is one id or token
    string for all prompts, or one per prompt (``[prompts]``; with
    ``position=None`` also ``[prompts, seq]``).

    Finer rows, on the blocks of ``layers`` (every block by default; the
    others' rows stay whole), each group adding up to the row it replaces:

    - ``heads=True``: each attention's heads one by one through its output
      projection ``o_proj`` (``layers.i.self_attn.heads.h``), plus that
      projection's bias (``layers.i.self_attn.o_proj.bias``);
    - ``neurons=True``: each MLP's neurons, ``mlp_neurons[..., n]`` times row
      ``n`` of its down projection (``layers.i.mlp.neurons.n``), plus the
      projection's bias (``layers.i.mlp.down_proj.bias``);
    - ``experts=True``: each mixture's experts, expert ``e``'s weighted output
      as it enters the mixture's sum (``expert_outputs`` of the slots that
      run it; ``layers.i.mlp.experts.e``), plus the shared expert's
      (``layers.i.mlp.shared_experts``) where there is one. A dense block's
      MLP is left whole, or split per neuron with ``neurons=True`` too; a
      mixture's MLP has no neurons of its own, and ``neurons=True`` alone
      refuses it.

    On a sandwich block ``attention_output`` and ``mlp_output`` are the post
    norms' outputs: the raw output (``o_proj(attention_head_outputs)``, the
    MLP's) goes through that norm with its per-token scale frozen at the one
    the model used (as the final norm's is, below), so the heads', neurons'
    or experts' terms, with the norm's bias as one more row
    (``layers.i.post_attention_layernorm.bias``,
    ``layers.i.post_feedforward_layernorm.bias`` on Gemma-2), add up to the
    contribution's term exactly. Where anything else follows (a scale), the
    split is unavailable.

    How it is linear: the final norm is applied with its per-token scale
    frozen at the one the model used on the actual final stream (and its
    mean-centering, if it centers, applied to each contribution, which is
    linear), so the norm of the sum is the sum of the normed contributions
    plus the norm's bias. Then the unembedding rows of ``tokens``. Whatever
    the family's ``project_on_vocab`` does after the unembedding (Gemma-2's
    softcap, Cohere's scale) is applied the same way, as the per-token ratio
    of the model's logit to the unembedded one. So ``values.sum(0)`` equals
    ``logits``, the model's own logits of ``tokens`` (up to float rounding),
    which is returned beside them.

    Needs the model's weights here (not remote), ``DECOMPOSE_RESID`` in the
    cache, the last block's ``layer_output`` (else the sum of contributions
    stands for it), ``logits`` if cached (else they are recomputed with
    ``project_on_vocab``), and for the finer rows ``HEAD_OUTPUTS``,
    ``NEURONS`` or ``EXPERTS`` (with ``shared_expert_output`` where a
    mixture has a shared expert) on the blocks split.
    """
    from . import _mlp_split as split

    function = "direct_logit_attribution"
    _arguments.outside_trace(function)
    _arguments.loaded(model)
    decomposed = decompose_resid(cache)
    if position is not None:
        position = _arguments.index(
            position,
            decomposed.values.shape[2],
            function=function,
            argument="position",
            what="positions of the cached prompts",
        )
    split_layers = set(_arguments.layers(model, layers, function=function)) if (heads or neurons or experts) else set()
    if neurons and not experts:
        for index in sorted(split_layers):
            if split.is_mixture(model, index):
                reason = model.support(index).get("mlp.mlp_neurons") or "a mixture of experts"
                raise Unavailable(
                    model.layers[index].mlp, "mlp_neurons", f"{reason}; pass experts=True to split a mixture per expert"
                )
    at = (lambda tensor: tensor) if position is None else (lambda tensor: tensor[:, position])
    last = f"layers.{cache.num_layers - 1}.layer_output"
    final = at(cache[last]) if last in cache else at(decomposed.values.sum(0))
    everything = at(cache["logits"]) if "logits" in cache else None
    everything, unembedded_all = _model_logits(model, final, everything)

    shape, factor, norm_bias = _frozen_norm(model.__dict__.get("norm"), final, "model.norm")
    unembedding = model.lm_head._module
    weight = getattr(unembedding, "weight", None)
    if not isinstance(unembedding, torch.nn.Linear) or weight is None:
        raise Unavailable("model.lm_head", "direct_logit_attribution", "lm_head is not a linear unembedding")
    ids = _token_ids(model, tokens, tuple(final.shape[:-1])).to(weight.device)
    rows = weight[ids].float()  # [prompts, (seq,) hidden]
    readout = split.Readout(shape, factor, rows)
    shift = (
        unembedding.bias[ids].float() if unembedding.bias is not None else torch.zeros(ids.shape, device=weight.device)
    )

    parts, labels = [], []
    for label, value in zip(decomposed.labels, decomposed.values):
        layer, _, term = label.removeprefix("layers.").partition(".")
        # the block whose term is split, None where the term is read whole
        split_at = int(layer) if layer.isdigit() and int(layer) in split_layers else None
        if split_at is not None and heads and term == "self_attn.attention_output":
            outputs = at(
                _need(cache, f"layers.{split_at}.self_attn.attention_head_outputs", (*DECOMPOSE_RESID, *HEAD_OUTPUTS))
            )
            values, names = split.head_terms(model, split_at, outputs, at(value), readout)
            parts.append(values)
            labels += names
        elif split_at is not None and term == "mlp.mlp_output" and experts and split.is_mixture(model, split_at):
            needs = (*DECOMPOSE_RESID, *EXPERTS)
            shared = None
            if split.has_shared_expert(model, split_at):
                shared = at(
                    _need(
                        cache,
                        f"layers.{split_at}.mlp.shared_expert_output",
                        (*needs, "layers.*.mlp.shared_expert_output"),
                    )
                )
            values, names = split.expert_terms(
                model, split_at, at(_need(cache, f"layers.{split_at}.mlp.expert_outputs", needs)),
                at(_need(cache, f"layers.{split_at}.mlp.expert_indices", needs)), shared, at(value), readout,
            )  # fmt: skip
            parts.append(values)
            labels += names
        elif split_at is not None and term == "mlp.mlp_output" and neurons and not split.is_mixture(model, split_at):
            activations = at(_need(cache, f"layers.{split_at}.mlp.mlp_neurons", (*DECOMPOSE_RESID, *NEURONS)))
            values, names = split.neuron_terms(model, split_at, activations, at(value), readout)
            parts.append(values)
            labels += names
        else:
            parts.append(readout.read(at(value))[None])
            labels.append(label)
    values = torch.cat([part.to(rows.device) for part in parts])
    bias = (norm_bias.to(rows.device) * rows).sum(-1) + shift
    values = torch.cat([values, bias[None]])

    unembedded = values.sum(0)
    expected = unembedded_all.to(rows.device).gather(-1, ids[..., None])[..., 0]
    if not torch.allclose(unembedded, expected, rtol=1e-2, atol=1e-2 * float(expected.abs().max()) + 1e-6):
        raise ValueError(
            "the contributions do not add up to the final stream: "
            "layer_input + the block's contributions() != layer_output somewhere on this model"
        )
    logits = everything.to(rows.device).gather(-1, ids[..., None])[..., 0]
    ratio = torch.where(unembedded != 0, logits / unembedded, torch.ones_like(logits))
    return Attribution((values * ratio).cpu(), [*labels, BIAS], logits.cpu())


def _model_logits(model: StandardModel, final: Tensor, logits: Tensor | None) -> tuple[Tensor, Tensor]:
    """The model's logits for ``final`` (``logits`` when cached) and ``lm_head(norm(final))``, the first checked to be an increasing function of ``lm_head(norm(final))`` token by token.

    The ratio that carries the attributions from the unembedded logit to the
    model's assumes it: true of a softcap and of a positive scale, not of a
    family that projects between the norm and the unembedding (OPT's
    ``project_out``) or transforms the stream in its head (BERT), which raise.
    """
    unembedding = model.lm_head._module
    parameter = next(unembedding.parameters())
    stream = final.to(parameter.device, parameter.dtype)
    if logits is None:
        logits = model.project_on_vocab(stream)
    logits = logits.float().to(parameter.device)
    module = model.__dict__.get("norm")
    try:
        unembedded = unembedding(module._module(stream) if module is not None else stream).float()
    except RuntimeError as error:
        unembedded = error
    if isinstance(unembedded, RuntimeError) or unembedded.shape != logits.shape:
        raise Unavailable(
            "model",
            "direct_logit_attribution",
            "the logits are not lm_head(norm(stream)): the family projects in between",
        )
    climbing = logits.gather(-1, unembedded.argsort(-1)).diff(dim=-1)
    if bool((climbing < -1e-4 * float(logits.abs().max()) - 1e-6).any()):
        raise Unavailable(
            "model",
            "direct_logit_attribution",
            "the family's project_on_vocab is not an increasing function of lm_head(norm(stream)) token by token",
        )
    return logits, unembedded
