"""A recurrent mixer's interior, tied together: each token's state follows from the one before it by the mixer's rule,
and each token's head output is its query's read of that state.

The rule is the one the mixer's component names (``RULE``), stated in ``nnterp_conformance.recurrences``; every value
is read where the family points it, on a prompt (inside ``keeping_states()``, so the state after every token exists)
and on a decode step. A value read one operation late (Mamba-1's output after its ``silu(z)`` gate, a DeltaNet's after
its gated norm) or one early (the keys before their activation) shows as a gap at the token and block that has it.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

from ..recurrences import recurrence
from nnterp.tolerances import coarsest
from .base import Case, CheckFailure, Gaps, Skip, check, expect_close
from .interior import DecodeStep, Prompt, reads, text_block
from .recurrent import _recurrent, is_recurrent

MIXER = "linear_attn"
QUERIES, KEYS, VALUES = f"{MIXER}.attention_queries", f"{MIXER}.attention_keys", f"{MIXER}.attention_values"
DECAYS, BETAS, STATES, HEADS = f"{MIXER}.decays", f"{MIXER}.betas", f"{MIXER}.states", f"{MIXER}.attention_head_outputs"
STATE_INPUT = f"{MIXER}.state_input"


def _ruled(model: Any, names: tuple[str, ...]) -> list[int]:
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
    rule = recurrence(mixer)
    lacks = {BETAS: rule.betas, DECAYS: rule.decays, KEYS: rule.keys, QUERIES: rule.queries}
    return tuple(name for name in names if lacks.get(name, True))


def _runs(model: Any, case: Case) -> tuple[tuple[Prompt, str], ...]:
    return (Prompt(model, case), "the prompt"), (DecodeStep(model, case), "a decode step")


def _read(model: Any, layer: int, names: tuple[str, ...], run: Prompt) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``names`` of block ``layer`` on ``run``, the mixer keeping the state after every token: each in float32, and each
    as served. A comparison is judged by the coarsest of them: a kernel that takes half-precision
    queries or gates and keeps its state in float32 rounds as its half-precision inputs do."""
    with model.layers[layer].linear_attn.keeping_states():
        found = reads(model, text_block(layer), names, False, run)
    found = {name: value for name, value in found.items() if value is not None}
    return {name: value.float() for name, value in found.items()}, found


def _each(model: Any, case: Case, names: tuple[str, ...]) -> Iterator[tuple[str, Any, Any, dict, torch.dtype]]:
    """For the prompt and a decode step, each ruled block's ``(what, mixer, rule, values, dtype)``: the values
    ``names`` in float32 (with ``state_input`` on a decode step), and the coarsest dtype they were served in, which a
    comparison is judged by."""
    blocks = _ruled(model, names)
    for run, label in _runs(model, case):
        for layer in blocks:
            mixer = model.layers[layer].linear_attn
            found, served = _read(model, layer, _needed(mixer, names) + ((STATE_INPUT,) if run.steps else ()), run)
            yield f"layers[{layer}], {label}", mixer, recurrence(mixer), found, coarsest(*served.values())


@check("recurrent", applies=is_recurrent)
def states_follow_the_rule(model: Any, case: Case) -> str:
    """states[:, t] is the mixer's rule applied to states[:, t - 1] (state_input, or zeros, before the first) and token t's keys, values, decays and betas (where the rule has them)."""
    gaps = Gaps()
    for what, mixer, rule, found, dtype in _each(model, case, (KEYS, VALUES, DECAYS, BETAS, STATES)):
        states = found[STATES]
        before = found.get(STATE_INPUT, torch.zeros_like(states[:, 0]))
        for t in range(states.shape[1]):
            betas = found[BETAS][:, t] if rule.betas else None
            decays = found[DECAYS][:, t] if rule.decays else None
            expected = rule.step(mixer, before, found[KEYS][:, t] if rule.keys else None, found[VALUES][:, t], decays, betas)
            gaps.add(expect_close(f"{what}, token {t}: the state by {rule.writes} against states[:, {t}]", states[:, t], expected, dtype=dtype))
            before = states[:, t]
    return str(gaps)


@check("recurrent", applies=is_recurrent)
def head_outputs_read_the_states(model: Any, case: Case) -> str:
    """attention_head_outputs[:, t] is token t's queries reading states[:, t] by the mixer's rule (with the D * x skip where it has one)."""
    gaps = Gaps()
    for what, mixer, rule, found, dtype in _each(model, case, (QUERIES, VALUES, STATES, HEADS)):
        states, heads = found[STATES], found[HEADS]
        if heads.shape[1] != states.shape[1]:
            raise CheckFailure(f"{what}: {heads.shape[1]} head outputs for {states.shape[1]} states")
        expected = torch.stack([rule.read(mixer, states[:, t], found[QUERIES][:, t] if rule.queries else None, found[VALUES][:, t]) for t in range(states.shape[1])], dim=1)
        gaps.add(expect_close(f"{what}: {rule.reads} against attention_head_outputs", heads, expected, dtype=dtype))
    return str(gaps)
