"""The attention's interior, tied together: the scores are the queries against the keys, the head outputs the pattern
against the values, and the norms' outputs are what the sublayers read.

Each value is read where its descriptor points, the other side of the identity
recomputed from the others, so a value read one operation early or late (keys
before the rotary embedding or the cache, queries and keys swapped, the pattern
before its cast) shows as a gap at the block that has it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import nnsight
from nnsight.intervention.interleaver import OutOfOrderError
from nnterp import Unavailable, identities
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import (
    Case,
    CheckFailure,
    Gaps,
    Skip,
    check,
    expect_close,
    expect_holds,
    get,
    has_softmax_attention,
    prompt_lengths,
    require,
)

QUERIES, KEYS, VALUES = "self_attn.attention_queries", "self_attn.attention_keys", "self_attn.attention_values"
SCORES, PATTERN, HEADS = (
    "self_attn.attention_scores",
    "self_attn.attention_probabilities",
    "self_attn.attention_head_outputs",
)


def repeat_kv(states: torch.Tensor, heads: int, what: str) -> torch.Tensor:
    """``nnterp.identities.repeat_kv``, its mismatch a ``CheckFailure`` naming ``what``."""
    try:
        return identities.repeat_kv(states, heads)
    except identities.IdentityMismatch as error:
        raise CheckFailure(f"{what}: {error}") from None


def reads(model: StandardModel, host: Any, names: tuple[str, ...], bias: bool, run: Any) -> dict[str, torch.Tensor]:
    """The values ``names`` of the block ``host(model)`` (and its attention's ``score_bias()`` where ``bias``), on ``run``.

    One run in forward order where the family reads them so; else one run per value, so that a value pointed at the
    wrong operation still reads and the identity, not the order, is what fails. Under generate, the last step's values.
    """

    def one(chosen: tuple[str, ...], with_bias: bool) -> dict[str, torch.Tensor]:
        # the tracer is made on the with line: nnsight reads the block it runs from this frame
        with (
            torch.no_grad(),
            (
                model.generate(run.prompts, **run.GENERATE) if run.steps else model.trace(run.prompts, **run.inputs)
            ) as tracer,
        ):
            found = nnsight.save({})
            for _ in tracer.iter[: run.steps] if run.steps else [None]:
                # the bias is read first: it is an input of the attention, or made from one
                bias = host(model).self_attn.score_bias() if with_bias else None
                step = {} if bias is None else {"bias": bias.detach().clone()}
                for name in chosen:
                    value = get(host(model), name)  # None where a step has no such value (a prompt's state_input)
                    step[name] = None if value is None else value.detach().clone()
                found.update(step)
        return dict(found)

    try:
        return one(names, bias)
    except OutOfOrderError:
        apart: dict[str, torch.Tensor] = {}
        for name in names:
            apart.update(one((name,), False))
        return {**apart, **(one((), True) if bias else {})}


def text_block(layer: int) -> Any:
    """The text block ``layer`` of a model, as ``reads`` takes a block."""
    return lambda model: model.layers[layer]


class Prompt:
    """The case's prompts in one trace."""

    #: the generate steps read (0: a trace)
    steps = 0
    #: what the trace takes besides the prompts
    inputs: ClassVar[dict[str, Any]] = {}

    def __init__(self, model: StandardModel, case: Case) -> None:
        self.model, self.case = model, case

    @property
    def prompts(self) -> list:
        return self.case.batch

    def real_queries(self, seq: int) -> torch.Tensor:
        """``[batch, 1, seq, 1]``: whether each query position is a token of its prompt (the batch is left-padded)."""
        positions = torch.arange(seq)
        return torch.stack([positions >= seq - length for length in prompt_lengths(self.model, self.case)])[
            :, None, :, None
        ]


class DecodeStep(Prompt):
    """The case's first prompt and one greedy token after it: the second step continues the first's cache."""

    steps = 2

    GENERATE: ClassVar[dict[str, Any]] = {"max_new_tokens": 2, "min_new_tokens": 2, "do_sample": False}

    @property
    def prompts(self) -> list:
        return self.case.alone(0).batch

    def real_queries(self, seq: int) -> torch.Tensor:
        return torch.ones(1, 1, seq, 1, dtype=torch.bool)


def expected_scores(
    attention: Any, queries: torch.Tensor, keys: torch.Tensor, bias: torch.Tensor | None, what: str
) -> torch.Tensor:
    """``scaling * queries @ repeat_kv(keys)^T``, through the softcap, plus the declared bias, in float32."""
    keys = repeat_kv(keys.float(), queries.shape[1], what)
    scores = attention.scaling * queries.float() @ keys.transpose(-1, -2)
    if attention.softcap is not None:
        scores = attention.softcap * torch.tanh(scores / attention.softcap)
    if bias is None:
        return scores
    # a bias held longer than the scores (MPT's, over max_seq_len) is cut to their last queries and keys, as the model cuts it
    bias = bias[..., -min(bias.shape[-2], scores.shape[-2]) :, -scores.shape[-1] :]
    return scores + bias.float()


def scores_gap(model: StandardModel, host: Any, run: Any, what: str) -> float:
    """The gap of ``scaling * queries @ repeat_kv(keys)^T`` (+ softcap, + score_bias) against the block's attention_scores, where the mask keeps a key."""
    attention = host(model).self_attn
    has_bias = declares_bias(attention)
    found = reads(model, host, (QUERIES, KEYS, SCORES, PATTERN), has_bias, run)
    scores, pattern = found[SCORES], found[PATTERN]
    expected = expected_scores(
        attention, found[QUERIES], found[KEYS], found.get("bias"), f"{what}: scaling * queries @ keys^T"
    )
    if expected.shape != scores.shape:
        raise CheckFailure(
            f"{what}: scaling * queries @ keys^T is {tuple(expected.shape)}, attention_scores {tuple(scores.shape)} "
            "(keys read before the cache joins them to earlier tokens, or queries and keys of other layouts)"
        )
    # a masked key's probability is exactly zero; a padding row's scores are all masked, its pattern meaningless
    kept = (pattern.float() > 0) & run.real_queries(scores.shape[-2])
    try:
        judged = coarsest(
            scores, found[QUERIES], found[KEYS]
        )  # scores upcast to float32 from half-precision queries round as those do
        return expect_close(
            f"{what}: scaling * queries @ keys^T against attention_scores where the mask keeps a key",
            scores.float()[kept],
            expected[kept],
            dtype=judged,
        )
    except CheckFailure as failure:
        hint = (
            ""
            if has_bias
            else " (if the family adds a term to its scores, ALiBi or a learned bias, its attention declares it in score_bias)"
        )
        raise CheckFailure(f"{failure}{hint}") from None


def declares_bias(attention: Any) -> bool:
    """Whether the attention's component overrides ``score_bias`` (the base's adds nothing)."""
    from nnterp import Attention

    return type(attention).score_bias is not Attention.score_bias


@check("attention", applies=has_softmax_attention)
def scores_are_queries_against_keys(model: StandardModel, case: Case) -> str:
    """attention_scores == scaling * queries @ repeat_kv(keys)^T (+ softcap, + score_bias) where the mask keeps a key, on a prompt and on a decode step."""
    blocks = require(model, QUERIES, KEYS, SCORES, PATTERN)
    gaps = Gaps()
    for run, label in ((Prompt(model, case), "the prompt"), (DecodeStep(model, case), "a decode step")):
        for layer in blocks:
            gaps.add(scores_gap(model, text_block(layer), run, f"layers[{layer}], {label}"))
    return str(gaps)


def heads_gap(model: StandardModel, host: Any, run: Any, what: str) -> float:
    """The gap of ``attention_probabilities @ repeat_kv(attention_values)`` against the block's head outputs (its ``mixed_heads``)."""
    mixed = host(model).self_attn.mixed_heads
    heads_name = f"self_attn.{mixed}"
    found = reads(model, host, (VALUES, PATTERN, heads_name), False, run)
    heads = found[heads_name]
    try:
        expected = identities.heads_from_pattern(found[PATTERN], found[VALUES])
    except identities.IdentityMismatch as error:
        raise CheckFailure(f"{what}: {error}") from None
    identity = identities.HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES
    return expect_holds(
        identity,
        f"{what}: attention_probabilities @ attention_values against {mixed}",
        heads.float(),
        expected,
        dtype=heads.dtype,
    )


@check("attention", applies=has_softmax_attention)
def head_outputs_are_pattern_against_values(model: StandardModel, case: Case) -> str:
    """attention_head_outputs (or the component's mixed_heads, before a gate) == attention_probabilities @ repeat_kv(attention_values), on a prompt and on a decode step."""
    blocks = require(model, VALUES, PATTERN, HEADS)
    gaps = Gaps()
    for run, label in ((Prompt(model, case), "the prompt"), (DecodeStep(model, case), "a decode step")):
        for layer in blocks:
            gaps.add(heads_gap(model, text_block(layer), run, f"layers[{layer}], {label}"))
    return str(gaps)


@check("residual")
def norm_outputs_feed_the_sublayers(model: StandardModel, case: Case) -> str:
    """attention_norm_output is what the block's mixer is called with, mlp_norm_output what its MLP is called with."""
    from .base import available, mixer_of

    pairs = []
    for layer in range(model.num_layers):
        block, mixer = model.layers[layer], mixer_of(model, layer)
        readers = type(block).norm_readers
        if mixer is not None and layer in available(model, "attention_norm_output"):
            pairs.append((layer, "attention_norm_output", readers["attention_norm_output"].format(mixer=mixer)))
        if hasattr(block, "mlp") and layer in available(model, "mlp_norm_output"):
            pairs.append((layer, "mlp_norm_output", readers["mlp_norm_output"].format(mixer=mixer)))
    if not pairs:
        support = model.support()
        raise Skip(
            f"no block has attention_norm_output or mlp_norm_output ({support.get('attention_norm_output')}; {support.get('mlp_norm_output')})"
        )
    gaps = Gaps()
    run = Prompt(model, case)
    for layer, norm, called in pairs:
        try:
            found = reads(model, text_block(layer), (norm, called), False, run)
        except Unavailable:
            # an MLP written inline in its block is no module the model calls: its first projection is
            called = "mlp.up_proj.input"
            found = reads(model, text_block(layer), (norm, called), False, run)
        output, read = found[norm], found[called]
        if read.shape != output.shape and read.numel() == output.numel():
            read = read.view(output.shape)  # a module called with the tokens flattened (OPT's fc1)
        gaps.add(
            expect_close(
                f"layers[{layer}]: {norm} against what {called.rsplit('.', 1)[0]} is called with", output, read
            )
        )
    return str(gaps)
