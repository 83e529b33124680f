"""A recurrent mixer's interior, tied together: each token's state follows from the one before it by the mixer's rule,
each token's head output is its query's read of that state, and what a call writes to the cache is its last state.

The rule is the one the mixer's component names (``RULE``), stated in ``nnterp_conformance.recurrences``; every value
is read where the family points it, on each prompt alone, the padded batch (inside ``keeping_states()``, so the state
after every token exists) and a decode step. A value read one operation late (Mamba-1's output after its ``silu(z)`` gate, a DeltaNet's after
its gated norm) or one early (the keys before their activation) shows as a gap at the token and block that has it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from ..recurrences import Recurrence, recurrence
from .base import Case, CheckFailure, Gaps, Skip, check, expect_close
from .interior import DecodeStep, Prompt, reads, text_block
from .recurrent import _recurrent, is_recurrent

MIXER = "linear_attn"
QUERIES, KEYS, VALUES = f"{MIXER}.attention_queries", f"{MIXER}.attention_keys", f"{MIXER}.attention_values"
DECAYS, BETAS, STATES, HEADS = f"{MIXER}.decays", f"{MIXER}.betas", f"{MIXER}.states", f"{MIXER}.attention_head_outputs"
STATE_INPUT, STATE_OUTPUT = f"{MIXER}.state_input", f"{MIXER}.state_output"


def _ruled(model: StandardModel, names: tuple[str, ...]) -> list[int]:
    """The recurrent blocks whose mixer declares a rule the kit knows and serves every one of ``names``; Skip if none."""
    blocks, reasons = [], set()
    for layer in _recurrent(model):
        mixer = model.layers[layer].linear_attn
        if recurrence(mixer) is None:
            reasons.add(f"{type(mixer).__name__} declares no RULE the kit knows")
            continue
        with mixer.keeping_states():  # what the checks read under: the state after every token exists there
            support = mixer.support()
        missing = {name: support.get(name.split(".")[1]) for name in _needed(mixer, names)}
        missing = {name: reason for name, reason in missing.items() if reason is not None}
        if missing:
            reasons.update(f"{name}: {reason}" for name, reason in missing.items())
            continue
        blocks.append(layer)
    if not blocks:
        raise Skip(f"no recurrent block serves its rule's values ({'; '.join(sorted(reasons))})")
    return blocks


def _needed(mixer: Any, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` less those the mixer's rule does not read: the betas of a rule whose tokens write at full strength,
    the decays of one whose state never decays (a short convolution's window), the keys and queries of one whose
    output is its state (RG-LRU)."""
    rule = cast(Recurrence, recurrence(mixer))  # a mixer of a block _ruled kept: it declares a rule the kit knows
    lacks = {BETAS: rule.betas, DECAYS: rule.decays, KEYS: rule.keys, QUERIES: rule.queries}
    return tuple(name for name in names if lacks.get(name, True))


def _runs(model: StandardModel, case: Case, alone: bool = True) -> tuple[tuple[Prompt, str], ...]:
    """Each prompt alone (``alone``, where the batch has several), the padded batch, and a decode step: a value that
    agrees with the rule only where another row's padding runs before it (a reset the padding reaches) fails on its
    prompt alone, which comes first."""
    each = (
        [(Prompt(model, case.alone(row)), f"prompt {row} alone") for row in range(len(case.prompts))]
        if alone and len(case.prompts) > 1
        else []
    )
    return (*each, (Prompt(model, case), "the prompt"), (DecodeStep(model, case), "a decode step"))


def _read(
    model: StandardModel, layer: int, names: tuple[str, ...], run: Prompt
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``names`` of block ``layer`` on ``run``, the mixer keeping the state after every token: each in float32, and each
    as served. A comparison is judged by the coarsest of them: a kernel that takes half-precision
    queries or gates and keeps its state in float32 rounds as its half-precision inputs do."""
    with model.layers[layer].linear_attn.keeping_states():
        found = reads(model, text_block(layer), names, False, run)
    found = {name: value for name, value in found.items() if value is not None}
    return {name: value.float() for name, value in found.items()}, found


def _each(
    model: StandardModel, case: Case, names: tuple[str, ...]
) -> Iterator[tuple[str, Any, Any, dict, torch.dtype, bool]]:
    """For the padded batch, each prompt alone and a decode step, each ruled block's ``(what, mixer, rule, values,
    dtype, alone)``: the values ``names`` in float32 (with ``state_input`` on a decode step), the coarsest dtype they
    were served in, which a comparison is judged by, and whether the run is one prompt from its first token (unpadded:
    its first token starts the sequence)."""
    blocks = _ruled(model, names)
    for run, label in _runs(model, case):
        for layer in blocks:
            mixer = model.layers[layer].linear_attn
            found, served = _read(model, layer, _needed(mixer, names) + ((STATE_INPUT,) if run.steps else ()), run)
            alone = not run.steps and len(run.prompts) == 1
            yield f"layers[{layer}], {label}", mixer, recurrence(mixer), found, coarsest(*served.values()), alone


def _any_state(like: torch.Tensor) -> torch.Tensor:
    """A state of ``like``'s layout that is not zeros (fixed seed): what a resetting rule's first token must forget."""
    generator = torch.Generator().manual_seed(0)
    return torch.randn(like.shape, generator=generator, dtype=torch.float32).to(like.dtype)


@check("recurrent", applies=is_recurrent)
def states_follow_the_rule(model: StandardModel, case: Case) -> str:
    """states[:, t] is the mixer's rule applied to states[:, t - 1] (state_input, or zeros, before the first; any state where the rule resets at a prompt's first token) and token t's keys, values, decays and betas (where the rule has them), on the batch, each prompt alone and a decode step."""
    gaps = Gaps()
    for what, mixer, rule, found, dtype, alone in _each(model, case, (KEYS, VALUES, DECAYS, BETAS, STATES)):
        states = found[STATES]
        # a prompt alone starts its sequence at token 0: a resetting rule keeps nothing of whatever came before
        forgets = alone and rule.resets and STATE_INPUT not in found
        before = found.get(STATE_INPUT, _any_state(states[:, 0]) if forgets else torch.zeros_like(states[:, 0]))
        for t in range(states.shape[1]):
            betas = found[BETAS][:, t] if rule.betas else None
            decays = found[DECAYS][:, t] if rule.decays else None
            expected = rule.step(
                mixer, before, found[KEYS][:, t] if rule.keys else None, found[VALUES][:, t], decays, betas
            )
            start = (
                " from a random state before (the sequence starts: nothing of it is kept)" if forgets and t == 0 else ""
            )
            gaps.add(
                expect_close(
                    f"{what}, token {t}: the state by {rule.writes}{start} against states[:, {t}]",
                    states[:, t],
                    expected,
                    dtype=dtype,
                )
            )
            before = states[:, t]
    return str(gaps)


@check("recurrent", applies=is_recurrent)
def head_outputs_read_the_states(model: StandardModel, case: Case) -> str:
    """attention_head_outputs[:, t] is token t's queries reading states[:, t] by the mixer's rule (with the D * x skip where it has one), on the batch, each prompt alone and a decode step."""
    gaps = Gaps()
    for what, mixer, rule, found, dtype, _ in _each(model, case, (QUERIES, VALUES, STATES, HEADS)):
        states, heads = found[STATES], found[HEADS]
        if heads.shape[1] != states.shape[1]:
            raise CheckFailure(f"{what}: {heads.shape[1]} head outputs for {states.shape[1]} states")
        expected = torch.stack(
            [
                rule.read(mixer, states[:, t], found[QUERIES][:, t] if rule.queries else None, found[VALUES][:, t])
                for t in range(states.shape[1])
            ],
            dim=1,
        )
        gaps.add(expect_close(f"{what}: {rule.reads} against attention_head_outputs", heads, expected, dtype=dtype))
    return str(gaps)


def _tied(model: StandardModel) -> list[int]:
    """The recurrent blocks whose mixer serves the state after each token (where the kit's checks read it, inside
    ``keeping_states()``) beside ``state_output``; Skip with the reasons where none does."""
    blocks, reasons = [], set()
    for layer in _recurrent(model):
        mixer = model.layers[layer].linear_attn
        with mixer.keeping_states():
            reason = mixer.support().get("states")
        if reason is None:
            blocks.append(layer)
        else:
            reasons.add(f"layers[{layer}].linear_attn states: {reason}")
    if not blocks:
        raise Skip(
            f"no recurrent block serves the state after each token to tie state_output to ({'; '.join(sorted(reasons))})"
        )
    return blocks


@check("recurrent", applies=is_recurrent)
def state_output_is_the_last_state(model: StandardModel, case: Case) -> str:
    """state_output, what a call writes to the cache, is the last state it computes: states at each row's last real token (the last column of the left-padded batch), on a prompt and on a decode step."""
    gaps = Gaps()
    blocks = _tied(model)
    for run, label in _runs(model, case, alone=False):
        for layer in blocks:
            what = f"layers[{layer}], {label}"
            found, _ = _read(model, layer, (STATES, STATE_OUTPUT), run)
            if STATES not in found:
                raise CheckFailure(f"{what}: states read None: no last state to hold state_output against")
            last = found[STATES][:, -1]
            if STATE_OUTPUT not in found:
                raise CheckFailure(
                    f"{what}: state_output is None on a call that keeps its state, against the last state states[:, -1] (read before the call writes the cache?)"
                )
            # one state, two bindings of it (the kernel's return, the loop's or the window's own): exact up to a cast
            gaps.add(
                expect_close(f"{what}: state_output against the last state, states[:, -1]", found[STATE_OUTPUT], last)
            )
    return str(gaps)
