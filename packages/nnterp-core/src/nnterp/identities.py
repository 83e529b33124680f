"""The identities the standard values satisfy on every family, each written once, as pure functions over tensors.

An ``Identity`` says what it states and how close its two sides must be;
the functions beside it compute the side that is recomputed from other
values. The proof at load (``nnterp.proof``) and the conformance kit's checks
read the values (one trace, many, under generate, on a vLLM engine) and hand
the tensors here, so both judge the same equation by the same rule::

    verdict = CONTRIBUTION.judge(layer_output, stream_sum(layer_input, [attention_output, mlp_output]))
    verdict.ok, verdict.gap, verdict.detail

Tolerances are ``nnterp.tolerances``': relative, judged at the coarsest dtype
of what the two sides were computed from (pass ``dtype=``), unless the
identity is ``exact`` (the same tensor handed on: ``torch.equal``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch
from torch import Tensor

from .tolerances import TOLERANCE, close


class IdentityMismatch(ValueError):
    """The tensors handed to an identity cannot be compared as it states (heads that do not group, keys that differ)."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One comparison of an identity's two sides: whether it holds, the gap, the gap allowed, and a line saying so."""

    ok: bool
    gap: float
    allowed: float
    detail: str


@dataclasses.dataclass(frozen=True)
class Identity:
    """An equation between standard values that holds on every family by the values' definitions."""

    #: the name the proof and the kit report it under
    name: str
    #: the equation, in the standard names: ``layer_input + attention_output + mlp_output == layer_output``
    states: str
    #: whether the two sides are one tensor handed on (compared with ``torch.equal``) rather than two computations
    exact: bool = False

    @property
    def title(self) -> str:
        """``name (states)``: how the proof's findings name it."""
        return f"{self.name} ({self.states})"

    def judge(self, actual: Tensor, expected: Tensor, dtype: torch.dtype | None = None) -> Verdict:
        """Whether the value read, ``actual``, equals the side recomputed, ``expected``, as this identity states it.

        ``dtype`` is the tolerance's: the coarsest of the tensors both sides
        were computed from and the dtype the model computes in
        (``tolerances.coarsest``); ``expected``'s by default.
        """
        return compare(actual, expected, dtype, exact=self.exact)


def compare(
    actual: Tensor, expected: Tensor, dtype: torch.dtype | None = None, exact: bool = False, table: dict = TOLERANCE
) -> Verdict:
    """``actual`` against ``expected``: equal (``exact``), or close at ``dtype``'s tolerance in ``table`` (``expected``'s
    dtype by default; ``BATCH_TOLERANCE`` for a padded row against its prompt alone)."""
    if actual.shape != expected.shape:
        return Verdict(
            False, float("inf"), 0.0, f"shapes differ, {tuple(actual.shape)} against {tuple(expected.shape)}"
        )
    if exact:
        if torch.equal(actual, expected):
            return Verdict(True, 0.0, 0.0, "equal")
        gap = (actual.double() - expected.double()).abs().max().item()
        return Verdict(False, gap, 0.0, f"off by {gap:.3g} (they must be equal)")
    ok, gap, allowed = close(actual, expected, table, dtype)
    return Verdict(
        ok, gap, allowed, f"largest gap {gap:.3g}" if ok else f"off by {gap:.3g} (max abs; allowed {allowed:.3g})"
    )


CONTRIBUTION = Identity("contribution", "layer_input + attention_output + mlp_output == layer_output")
MID_STREAM = Identity("mid_stream", "layer_input + attention_output == layer_mid")
STREAM_CONTINUITY = Identity("stream_continuity", "each block's layer_input is the last one's layer_output", exact=True)
LOGITS_FROM_LAST_LAYER = Identity("logits_from_last_layer", "project_on_vocab(layers[-1].layer_output) == logits")
PATTERN_IS_SOFTMAX_OF_SCORES = Identity(
    "pattern_is_softmax_of_scores", "softmax(attention_scores) == attention_probabilities"
)
HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES = Identity(
    "head_outputs_are_pattern_against_values", "attention_probabilities @ attention_values == the heads"
)
NEURONS_MAKE_CONTRIBUTION = Identity("neurons_make_contribution", "down_proj(mlp_neurons) == mlp_output")


def stream_sum(layer_input: Tensor, terms: Iterable[Tensor]) -> Tensor:
    """``layer_input + sum(terms)`` in float32: the stream a block's contributions add up to.

    Summed in float32 whatever the dtypes: a block may keep its stream in
    float32 under half-precision sublayers (Mamba's). Judge it at the
    coarsest dtype of the terms.
    """
    return sum((term.float() for term in terms), layer_input.float())


def softmax_pattern(scores: Tensor, sinks: Tensor | None = None) -> Tensor:
    """The pattern ``softmax(scores)`` over the keys, in float32; with ``sinks``, one logit a head, the sink's column
    joins the softmax and is dropped after (GPT-OSS's, ``[num_heads]``)."""
    scores = scores.float()
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    column = sinks.detach().float().view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]


def repeat_kv(states: Tensor, heads: int) -> Tensor:
    """``[batch, kv_heads, seq, dim]`` repeated to ``heads`` heads, each key/value head serving its group of query heads."""
    kv_heads = states.shape[1]
    if kv_heads == 0 or heads % kv_heads:
        raise IdentityMismatch(f"{kv_heads} key/value heads cannot serve {heads} query heads")
    return states.repeat_interleave(heads // kv_heads, dim=1)


def heads_from_pattern(pattern: Tensor, values: Tensor) -> Tensor:
    """``pattern @ repeat_kv(values)``, seq first: ``[batch, seq, num_heads, head_dim]`` in float32.

    ``pattern`` is ``[batch, num_heads, query, key]``, ``values``
    ``[batch, num_kv_heads, key, head_dim]``. The attention weighs the values
    by the pattern in one dtype: a pattern in another dtype than the values
    was read before its cast (``IdentityMismatch``), as is one over other keys
    than the values (values read before the cache joins earlier tokens).
    """
    if pattern.dtype != values.dtype:
        raise IdentityMismatch(
            f"attention_probabilities @ attention_values mixes {pattern.dtype} with {values.dtype}: the attention "
            "weighs the values by the pattern in their own dtype (the pattern read before its cast to the model's dtype?)"
        )
    grouped = repeat_kv(values.float(), pattern.shape[1])
    if pattern.shape[-1] != grouped.shape[-2]:
        raise IdentityMismatch(
            f"attention_probabilities cover {pattern.shape[-1]} keys, attention_values {grouped.shape[-2]} "
            "(values read before the cache joins them to earlier tokens?)"
        )
    return (pattern.float() @ grouped).transpose(1, 2)
