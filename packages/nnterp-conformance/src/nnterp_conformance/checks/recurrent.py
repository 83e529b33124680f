"""Recurrent mixers: the state continues from call to call, the state after each token is the scan's, writes carry on.

These run on every checkpoint with a recurrent mixer (a block's ``linear_attn``
serving ``state_output``) and are not reported on the others. The checks that
read the state after each token do it inside ``mixer.keeping_states()`` (the
kernels routed token by token, or the chunks cut to one token) and leave the
mixer as they found it.
"""

from __future__ import annotations

from typing import Any

import nnsight
from nnterp.descriptors import declared_values
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import Case, CheckFailure, Gaps, Skip, check, expect_close, model_dtype

STEPS = 3


def _recurrent(model: StandardModel) -> list[int]:
    """The blocks whose mixer is recurrent and serves its state."""
    found = []
    for layer in range(model.num_layers):
        mixer = model.layers[layer].__dict__.get("linear_attn")
        if mixer is not None and "state_output" in type(mixer).values() and mixer.support().get("state_output") is None:
            found.append(layer)
    return found


def is_recurrent(model: StandardModel) -> bool:
    """Whether any block of ``model`` mixes tokens through a recurrent state."""
    return bool(_recurrent(model))


def _ids(model: StandardModel, case: Case) -> list[int]:
    prompt = case.prompts[0]
    return list(prompt) if not isinstance(prompt, str) else model.tokenizer(prompt)["input_ids"]


@check("recurrent", applies=is_recurrent)
def state_continues_into_decode(model: StandardModel, case: Case) -> str:
    """Under generate, the prompt starts from no state (state_input None, as its none_when_fresh declares) and each decode step from the state the step before left (state_input == state_output)."""
    blocks = _recurrent(model)
    prompt = case.alone(0)
    with (
        torch.no_grad(),
        model.generate(prompt.batch, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer,
    ):
        steps = nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            step = []
            for layer in blocks:
                mixer = model.layers[layer].linear_attn
                started = mixer.state_input
                step.append((started, mixer.state_output.detach().clone()))
            steps.append(step)
    if len(steps) != STEPS:
        raise CheckFailure(f"read {len(steps)} steps of {STEPS}")
    gaps = Gaps()
    for layer, (started, _) in zip(blocks, steps[0]):
        if started is not None:
            raise CheckFailure(f"layers[{layer}]: the prompt started from a state, not from none")
        # what the toolkit's fresh-call functions (cache_values' "*") rely on to leave it out instead of reading None
        if declared_values(type(model.layers[layer].linear_attn))["state_input"].none_when_fresh is None:
            raise CheckFailure(
                f"layers[{layer}]: state_input is None on the prompt but does not declare none_when_fresh"
            )
    for index in range(1, STEPS):
        for layer, (started, _), (_, left) in zip(blocks, steps[index], steps[index - 1]):
            if started is None:
                raise CheckFailure(f"step {index}, layers[{layer}]: the decode step started from no state")
            gaps.add(
                expect_close(
                    f"step {index}, layers[{layer}]: state_input against the step before's state_output", started, left
                )
            )
    return f"{STEPS} steps; {gaps}"


@check("recurrent", applies=is_recurrent)
def states_follow_the_scan(model: StandardModel, case: Case) -> str:
    """Token by token, states[:, -1] is state_output, state_after(t) is states[:, t], and the last state is the chunked kernel's."""
    layer = case.pick(_recurrent(model))
    mixer = model.layers[layer].linear_attn
    with torch.no_grad(), model.trace(case.batch):
        chunked = model.layers[layer].linear_attn.state_output.detach().clone().save()
    with mixer.keeping_states():
        with torch.no_grad(), model.trace(case.batch):
            states = model.layers[layer].linear_attn.states.detach().clone().save()
            left = model.layers[layer].linear_attn.state_output.detach().clone().save()
        t = min(int(case.head * states.shape[1]), states.shape[1] - 1)
        with torch.no_grad(), model.trace(case.batch):
            after = model.layers[layer].linear_attn.state_after(t).detach().clone().save()
    gaps = Gaps()
    gaps.add(expect_close(f"layers[{layer}]: states[:, -1] against state_output", states[:, -1], left))
    gaps.add(expect_close(f"layers[{layer}]: state_after({t}) against states[:, {t}]", after, states[:, t]))
    # two kernels, two orders of half-precision arithmetic: judged by the model's dtype
    gaps.add(
        expect_close(
            f"layers[{layer}]: the token-by-token state_output against the chunked kernel's",
            left,
            chunked,
            dtype=coarsest(chunked, model_dtype(model)),
        )
    )
    return str(gaps)


def _handed(model: StandardModel, layer: int) -> Any:
    """The cache a call continuing a prompt is handed from the start (``new_cache()``: a model that keeps its state on
    its modules and returns no cache, RecurrentGemma), or None where the prompt's call returns the one it keeps."""
    new_cache = getattr(model.layers[layer].linear_attn, "new_cache", None)
    return None if new_cache is None else new_cache()


def _split(
    model: StandardModel, layer: int, ids: list[int], cut: int, edit: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompt in two calls, the second over the first's cache: the second call's states and head outputs.

    ``edit(mixer)`` runs in the first call (a write of its ``state_output``).
    The cache is handed back as ``cache=``, the name every model's forward
    takes it by. A mixer whose call of several tokens starts
    from zeros rather than the cache (``PROMPT_TAKES_STATE = False``: Mamba-1)
    continues from it only one token a call, as decode steps, so the rest is
    fed so.
    """
    whole = getattr(type(model.layers[layer].linear_attn), "PROMPT_TAKES_STATE", True)
    pieces = [ids[cut:]] if whole else [[token] for token in ids[cut:]]
    cache = _handed(model, layer)
    with (
        torch.no_grad(),
        model.trace(torch.tensor([ids[:cut]]), use_cache=True, **({} if cache is None else {"cache": cache})),
    ):
        if edit is not None:
            edit(model.layers[layer].linear_attn)
        if cache is None:
            cache = model.output.cache.save()
    states, heads = [], []
    for piece in pieces:
        with torch.no_grad(), model.trace(torch.tensor([piece]), use_cache=True, cache=cache):
            mixer = model.layers[layer].linear_attn
            states.append(mixer.states.detach().clone().save())
            heads.append(mixer.attention_head_outputs.detach().clone().save())
    return torch.cat(states, dim=1), torch.cat(heads, dim=1)


@check("recurrent", applies=is_recurrent)
def split_prompt_continues(model: StandardModel, case: Case) -> str:
    """A prompt in two calls, the second over the first's cache, has the states and head outputs of one call."""
    layer = case.pick(_recurrent(model))
    ids = _ids(model, case)
    if len(ids) < 3:
        raise Skip("the prompt has fewer than 3 tokens to split")
    cut = max(1, len(ids) // 2)
    mixer = model.layers[layer].linear_attn
    with mixer.keeping_states():
        with torch.no_grad(), model.trace(torch.tensor([ids]), use_cache=True):
            states = model.layers[layer].linear_attn.states.detach().clone().save()
            heads = model.layers[layer].linear_attn.attention_head_outputs.detach().clone().save()
        split_states, split_heads = _split(model, layer, ids, cut)
    gaps = Gaps()
    # one call and two compute the same states along other paths (a scan and decode steps): judged by the model's dtype
    judged = coarsest(states, model_dtype(model))
    gaps.add(
        expect_close(
            f"layers[{layer}]: the second call's states against one call's after token {cut - 1}",
            split_states,
            states[:, cut:],
            dtype=judged,
        )
    )
    gaps.add(
        expect_close(
            f"layers[{layer}]: the second call's head outputs against one call's",
            split_heads,
            heads[:, cut:],
            dtype=judged,
        )
    )
    return str(gaps)


@check("recurrent", applies=is_recurrent)
def written_state_continues(model: StandardModel, case: Case) -> str:
    """set_state_after(t, v): the tokens after t continue from v, as a second call over a cache holding v does."""
    layer = case.pick(_recurrent(model))
    ids = _ids(model, case)
    if len(ids) < 3:
        raise Skip("the prompt has fewer than 3 tokens to split")
    cut = max(1, len(ids) // 2)
    t = cut - 1
    whole = torch.tensor([ids])
    mixer = model.layers[layer].linear_attn
    with mixer.keeping_states():
        if mixer.support().get("state") is not None:
            raise Skip(f"layers[{layer}].linear_attn has no state per token to write: {mixer.support()['state']}")
        with torch.no_grad(), model.trace(whole, use_cache=True):
            original = model.layers[layer].linear_attn.state_after(t).detach().clone().save()
            before = model.layers[layer].linear_attn.attention_head_outputs.detach().clone().save()
        written = case.edited(original)
        with torch.no_grad(), model.trace(whole, use_cache=True):
            model.layers[layer].linear_attn.set_state_after(t, written)
            after = model.layers[layer].linear_attn.attention_head_outputs.detach().clone().save()

        def hand_set(first_mixer: Any) -> None:
            first_mixer.state_output = written

        _, continued = _split(model, layer, ids, cut, hand_set)
    if torch.equal(after[:, cut:], before[:, cut:]):
        raise CheckFailure(
            f"layers[{layer}]: writing the state after token {t} left the later tokens' outputs as they were"
        )
    if not torch.equal(after[:, :t], before[:, :t]):
        raise CheckFailure(
            f"layers[{layer}]: writing the state after token {t} changed the outputs of tokens before it"
        )
    judged = coarsest(continued, model_dtype(model))
    gap = expect_close(
        f"layers[{layer}]: the later tokens after the write against a call over a cache holding it",
        after[:, cut:],
        continued,
        dtype=judged,
    )
    return f"state after token {t} written; largest gap {gap:.3g}"


@check("recurrent", applies=is_recurrent)
def written_states_land(model: StandardModel, case: Case) -> str:
    """state_output = v leaves its call's output as it was and is the next call's state_input; state_input = v there gives that call the same outputs."""
    layer = case.pick(_recurrent(model))
    ids = _ids(model, case)
    if len(ids) < 2:
        raise Skip("the prompt has fewer than 2 tokens to split")
    first, step = torch.tensor([ids[:-1]]), torch.tensor([ids[-1:]])

    # the call's output: its contribution, or where the block adds none of its own (MiniMax's), what the module returns
    contributes = model.layers[layer].linear_attn.support().get("attention_output") is None

    def prompt(write: Any = None) -> tuple[Any, torch.Tensor, Any]:
        cache = _handed(model, layer)
        with torch.no_grad(), model.trace(first, use_cache=True, **({} if cache is None else {"cache": cache})):
            mixer = model.layers[layer].linear_attn
            left = mixer.state_output.detach().clone().save()
            if write is not None:
                mixer.state_output = write
            returned = mixer.attention_output if contributes else mixer.output
            output = (returned[0] if isinstance(returned, tuple) else returned).detach().clone().save()
            if cache is None:
                cache = model.output.cache.save()
        return left, output, cache

    def decode(cache: Any, write: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad(), model.trace(step, use_cache=True, cache=cache):
            mixer = model.layers[layer].linear_attn
            if write is not None:
                mixer.state_input = write
            started = model.layers[layer].linear_attn.state_input.detach().clone().save()
            heads = model.layers[layer].linear_attn.attention_head_outputs.detach().clone().save()
        return started, heads

    original, output, _ = prompt()
    written = case.edited(original)
    try:
        _, written_output, written_cache = prompt(written)
    except Exception as error:  # noqa: BLE001 - a write-back that breaks the forward is this check's failure
        raise CheckFailure(
            f"layers[{layer}]: the prompt with state_output written did not run ({type(error).__name__}: {error})"
        ) from None
    if not torch.equal(written_output, output):
        raise CheckFailure(
            f"layers[{layer}]: with state_output written, the call's own attention_output changed (the write replaced more than the state)"
        )
    started, continued = decode(written_cache)
    gaps = Gaps()
    gaps.add(
        expect_close(f"layers[{layer}]: the next call's state_input against the state_output written", started, written)
    )
    _, _, plain_cache = prompt()
    restarted, rewritten = decode(plain_cache, written)
    gaps.add(expect_close(f"layers[{layer}]: state_input written against the state it was given", restarted, written))
    gaps.add(
        expect_close(
            f"layers[{layer}]: the head outputs from state_input written against from state_output written",
            rewritten,
            continued,
        )
    )
    return str(gaps)


@check("recurrent", applies=is_recurrent)
def gates_in_range(model: StandardModel, case: Case) -> str:
    """decays are non-positive and betas lie in the mixer's documented range, on every recurrent block (each where served), on the padded batch and each prompt alone."""
    checked, reasons = 0, set()
    runs = [(case, "")] + (
        [(case.alone(row), f", prompt {row} alone") for row in range(len(case.prompts))]
        if len(case.prompts) > 1
        else []
    )
    for layer in _recurrent(model):
        mixer = model.layers[layer].linear_attn
        support = mixer.support()
        if support.get("decays") is not None:
            reasons.add(support["decays"])
            continue
        # a mixer whose tokens write at full strength has no betas (MiniMax's lightning attention)
        has_betas = support.get("betas", "no betas") is None
        for run, label in runs:
            betas = None
            with torch.no_grad(), model.trace(run.batch):
                decays = model.layers[layer].linear_attn.decays.detach().clone().save()
                if has_betas:
                    betas = model.layers[layer].linear_attn.betas.detach().clone().save()
            if (decays > 0).any():
                raise CheckFailure(f"layers[{layer}]{label}: decays reach {decays.max().item():.3g}, above 0")
            low, high = mixer.BETA_RANGE
            if betas is not None and ((betas < low).any() or (betas > high).any()):
                raise CheckFailure(
                    f"layers[{layer}]{label}: betas span [{betas.min().item():.3g}, {betas.max().item():.3g}], outside [{low}, {high}]"
                )
        checked += 1
    if not checked:
        raise Skip(f"no recurrent block serves decays and betas ({'; '.join(sorted(reasons))})")
    return f"{checked} blocks in range"
