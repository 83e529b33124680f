"""The kit on an engine's flat values: the identities that hold there, and agreement with transformers.

Each check is ``check(engine_run, reference_run) -> detail`` over two runs of
``nnterp_conformance.engine_runs`` on one checkpoint (the engine's, and the same
run under ``StandardizedTransformer``), raising ``CheckFailure`` naming the
value, block, prompt and step, ``Skip`` where the family serves too little for
it. The identities are judged by ``nnterp.tolerances`` at float32; agreement
with transformers too, since both compute the same float32 arithmetic and
differ only in kernels and summation order.
"""

from __future__ import annotations

from collections.abc import Callable

from nnterp.identities import CONTRIBUTION, MID_STREAM, STREAM_CONTINUITY, Identity, compare, stream_sum

import torch

from .base import CheckFailure, Skip

#: check name -> check, in the order they run
FLAT_CHECKS: dict[str, Callable[[dict, dict], str]] = {}


def flat_check(function: Callable[[dict, dict], str]) -> Callable[[dict, dict], str]:
    FLAT_CHECKS[function.__name__] = function
    return function


def _blocks(run: dict) -> int:
    return 1 + max(int(key.split(".", 1)[0]) for key in run["values"][0][0])


def _each_step(run: dict):
    for prompt, steps in enumerate(run["values"]):
        for step, values in enumerate(steps):
            yield prompt, step, values


def _where(prompt: int, step: int) -> str:
    return f"prompt {prompt}, {'the prompt' if step == 0 else f'decode step {step}'}"


def _needs(run: dict, *names: str) -> None:
    missing = [name for name in names if name not in run["names"]]
    if missing:
        raise Skip(f"the family serves no {', '.join(missing)} on this engine")


def _hold(
    name: str, actual: torch.Tensor, expected: torch.Tensor, where: str, identity: Identity | None = None
) -> None:
    """Fail naming ``name`` and ``where`` unless ``identity`` holds (a plain comparison at float32's tolerance without one)."""
    verdict = identity.judge(actual, expected) if identity is not None else compare(actual, expected)
    if not verdict.ok:
        raise CheckFailure(f"{name} at {where}: {verdict.detail}")


@flat_check
def flat_contribution(run: dict, reference: dict) -> str:
    """``layer_input + self_attn.attention_output + mlp.mlp_output == layer_output`` on every block, prompt and step."""
    _needs(run, "layer_input", "self_attn.attention_output", "mlp.mlp_output", "layer_output")
    count = 0
    for prompt, step, values in _each_step(run):
        for block in range(_blocks(run)):
            terms = (values[f"{block}.self_attn.attention_output"], values[f"{block}.mlp.mlp_output"])
            total = stream_sum(values[f"{block}.layer_input"], terms)
            what = f"layers[{block}]: layer_input + attention_output + mlp_output vs layer_output"
            _hold(what, values[f"{block}.layer_output"].float(), total, _where(prompt, step), CONTRIBUTION)
            count += 1
    return f"{count} blocks x steps"


@flat_check
def flat_mid_stream(run: dict, reference: dict) -> str:
    """``layer_input + self_attn.attention_output == layer_mid`` on every block, prompt and step."""
    _needs(run, "layer_input", "self_attn.attention_output", "layer_mid")
    for prompt, step, values in _each_step(run):
        for block in range(_blocks(run)):
            total = stream_sum(values[f"{block}.layer_input"], [values[f"{block}.self_attn.attention_output"]])
            what = f"layers[{block}]: layer_input + attention_output vs layer_mid"
            _hold(what, values[f"{block}.layer_mid"].float(), total, _where(prompt, step), MID_STREAM)
    return "held"


@flat_check
def flat_stream_continues(run: dict, reference: dict) -> str:
    """Each block's ``layer_output`` is exactly the next block's ``layer_input``."""
    _needs(run, "layer_input", "layer_output")
    for prompt, step, values in _each_step(run):
        for block in range(_blocks(run) - 1):
            handed, received = values[f"{block}.layer_output"], values[f"{block + 1}.layer_input"]
            what = f"layers[{block + 1}].layer_input vs layers[{block}].layer_output"
            _hold(what, received, handed, _where(prompt, step), STREAM_CONTINUITY)
    return "held"


@flat_check
def flat_values_agree(run: dict, reference: dict) -> str:
    """Every value the engine serves equals the same value under transformers, token for token, on the prompt and each decode step."""
    shared = [name for name in run["names"] if name in reference["names"]]
    if not shared:
        raise Skip("no value both serve")
    compared = 0
    for prompt, steps in enumerate(run["values"]):
        if len(steps) != len(reference["values"][prompt]):
            raise CheckFailure(
                f"prompt {prompt}: {len(steps)} steps on the engine, {len(reference['values'][prompt])} under transformers"
            )
        for step, values in enumerate(steps):
            expected = reference["values"][prompt][step]
            for key in (f"{block}.{name}" for block in range(_blocks(run)) for name in shared):
                block, name = key.split(".", 1)
                _hold(
                    f"layers[{block}].{name} (engine vs transformers)", values[key], expected[key], _where(prompt, step)
                )
                compared += 1
    return f"{compared} values"


@flat_check
def flat_logits_agree(run: dict, reference: dict) -> str:
    """The logits of each step equal transformers' last-position logits; the greedy tokens are the same."""
    for prompt, steps in enumerate(run["logits"]):
        for step, logits in enumerate(steps):
            _hold("logits (engine vs transformers)", logits, reference["logits"][prompt][step], _where(prompt, step))
    return "held"


@flat_check
def flat_edits_agree(run: dict, reference: dict) -> str:
    """Each edit (the stream, a contribution, the neurons, the routing) moves the prompt's logits as the same edit under transformers.

    And it moves them: an edit that left the logits as they were would pass agreement without reaching the model.
    """
    if not run["edits"]:
        raise Skip("no value an edit needs is served")
    for edit, rows in run["edits"].items():
        if edit not in reference["edits"]:
            raise CheckFailure(f"the {edit} edit ran on the engine but not under transformers")
        for prompt, row in enumerate(rows):
            unedited = run["logits"][prompt][0]
            if compare(row, unedited).ok:
                raise CheckFailure(
                    f"the {edit} edit left prompt {prompt}'s logits as they were: it did not reach the model"
                )
            _hold(
                f"logits under the {edit} edit (engine vs transformers)",
                row,
                reference["edits"][edit][prompt],
                f"prompt {prompt}",
            )
    return ", ".join(run["edits"])


def flat_verdicts(run: dict, reference: dict) -> dict[str, tuple[str, str]]:
    """Every flat check on the two runs: name -> (``"pass"``, ``"fail"`` or ``"skip"``, detail)."""
    verdicts = {}
    for name, check in FLAT_CHECKS.items():
        try:
            verdicts[name] = ("pass", check(run, reference))
        except Skip as skip:
            verdicts[name] = ("skip", str(skip))
        except CheckFailure as failure:
            verdicts[name] = ("fail", str(failure))
    return verdicts
