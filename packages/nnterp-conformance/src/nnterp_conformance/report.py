"""The families report: for every model type, which family serves it, which checks pass, what it lacks and why.

    uv run nnterp-conformance report            # writes docs/families.json and docs/families.md
    uv run nnterp-conformance report --check    # exits non-zero if the committed files are stale

Every record is computed: the kit runs on each registered tiny checkpoint (on
the fixed prompts, so the result is the same on every run), in float32 and on a
bfloat16 load, and every other
model type of transformers' causal-LM mapping is listed with the reason it is
out of reach. Nobody edits the files by hand.

The records are computed here; ``report_records`` holds their statuses and the reads
over them, ``report_render`` renders them, ``report_files`` writes the files and the
README's headline. This module re-exports those, the one entry of the CLI and the tests.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from .report_files import HEADLINE as HEADLINE
from .report_files import headline as headline
from .report_files import stale as stale
from .report_files import with_headline as with_headline
from .report_files import write as write
from .report_records import DECOMPOSITIONS as DECOMPOSITIONS
from .report_records import FAIL, HALF, OUT_OF_REACH, PASS
from .report_records import STREAM_TERMS as STREAM_TERMS
from .report_records import checkpoint_records as checkpoint_records
from .report_records import decomposes as decomposes
from .report_records import weak_passes as weak_passes
from .report_render import INTERIOR as INTERIOR
from .report_render import POST_LN as POST_LN
from .report_render import POST_LN_REASON as POST_LN_REASON
from .report_render import ROUTING as ROUTING
from .report_render import half_precision_section as half_precision_section
from .report_render import interior_section as interior_section
from .report_render import mixture_section as mixture_section
from .report_render import recurrent_section as recurrent_section
from .report_render import render_json as render_json
from .report_render import render_markdown as render_markdown
from .report_render import vision_section as vision_section
from .report_render import weak_section as weak_section


def unavailable_reasons(model: Any, support: dict[str, Any] | None = None) -> dict[str, str]:
    """Each value some block lacks, with the reason (and the blocks, where not every block lacks it).

    A residual term no block has (``nnterp.reasons.ABSENT_TERMS``: nothing rescales the stream, no per-layer
    input) is no value lacking: the block's sum simply has no such term, and the report leaves it out.
    ``support`` is ``model.support()``'s table where the caller has it already.
    """
    from nnterp.reasons import ABSENT_TERMS

    found: dict[str, str] = {}
    for name, reasons in (model.support() if support is None else support).items():
        if not reasons or (
            isinstance(reasons, dict)
            and len(reasons) == model.num_layers
            and set(reasons.values()) <= set(ABSENT_TERMS)
        ):
            continue
        if isinstance(reasons, str):
            found[name] = reasons
            continue
        groups: dict[str, list[int]] = {}
        for layer, reason in sorted(reasons.items()):
            groups.setdefault(reason, []).append(layer)
        everywhere = len(reasons) == model.num_layers and len(groups) == 1
        found[name] = (
            next(iter(groups))
            if everywhere
            else "; ".join(f"layers {layers}: {reason}" for reason, layers in groups.items())
        )
    return found


@functools.cache
def mixture_types() -> frozenset[str]:
    """The mapping's model types whose modeling module defines experts (a class named ``...Experts``).

    Read from transformers' own source, so a new mixture family shows up in
    the report's mixture table without anyone listing it.
    """
    import importlib.util

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    found = set()
    for model_type in mapping_types():
        module = model_type_to_module_name(model_type)
        spec = importlib.util.find_spec(f"transformers.models.{module}.modeling_{module}")
        if spec is not None and spec.origin and EXPERTS_CLASS.search(Path(spec.origin).read_text()):
            found.add(model_type)
    return frozenset(found)


EXPERTS_CLASS = re.compile(r"^class \w+Experts\(", re.M)


def record(model: Any, checkpoint: str, details: bool = False, half_precision_profile: bool = True) -> dict[str, Any]:
    """The report's record for one checkpoint: the kit's verdicts on the fixed prompts and the unavailable values.

    ``half_precision_profile=False`` leaves out the bfloat16 load's profile (``half_precision``), which costs as
    much again. With ``details`` (the upgrade radar's records; the committed report leaves them out), also each failing check's
    detail text under ``"details"``, where each check that crashed raised under ``"raised_at"``, and each value
    whose reason or read raises under ``"failing_values"`` (``value_failures``): the values are asked one by one,
    so a reason that raises fails that value rather than the record, and where ``available_values_resolve`` fails
    every value is read alone.
    """
    from .runner import PROMPTS, run

    verdicts = run(model)
    checks = {verdict.name: verdict.status for verdict in verdicts}
    failed = [verdict.name for verdict in verdicts if verdict.status == FAIL]
    skipped = {verdict.name: verdict.detail for verdict in verdicts if verdict.status == "skip"}
    failing_values: dict[str, Any] = {}
    if details:
        from .value_failures import failing_reads, support_by_value

        support, failing_values = support_by_value(model)
        if checks.get("available_values_resolve") == FAIL:
            failing_values.update(
                {name: found for name, found in failing_reads(model, PROMPTS).items() if name not in failing_values}
            )
    else:
        support = model.support()
    from nnterp.registry import family_module

    from .checkpoints import names, spec

    # the model type the checkpoint was written for (a model may save itself under another: emu3)
    model_type = spec(checkpoint).model_type if checkpoint in names() else model._module.config.model_type
    entry: dict[str, Any] = {
        "model_type": model_type,
        "checkpoint": checkpoint,
        "family": family_module(model.family),
        "status": FAIL if failed or failing_values else PASS,
        "checks": checks,
        "skipped": skipped,
        "unavailable": unavailable_reasons(model, support),
        "mixture": model_type in mixture_types(),
        "recurrent": recurrent_mixers(model),
    }
    if failed or failing_values:
        entry["reason"] = "; ".join(
            ([f"fails {', '.join(failed)}"] if failed else [])
            + ([f"values raise: {', '.join(failing_values)}"] if failing_values else [])
        )
    if checkpoint in names() and half_precision_profile:
        entry["half_precision"] = half_precision(checkpoint)
    if details:
        entry["details"] = {verdict.name: verdict.detail for verdict in verdicts if verdict.status == FAIL}
        entry["raised_at"] = {
            verdict.name: verdict.raised_at for verdict in verdicts if verdict.status == FAIL and verdict.raised_at
        }
        entry["failing_values"] = failing_values
    return entry


def half_precision(checkpoint: str) -> dict[str, Any]:
    """The kit on a bfloat16 load of ``checkpoint``, on the fixed prompts: pass, or the checks that fail and the
    identity each names (its detail up to the size of the gap, which depends on the machine's rounding)."""
    from nnterp.registry import checkpoint_family, family_named

    import torch

    from .runner import load, run

    verdicts = run(load(checkpoint, dtype=getattr(torch, HALF)))
    failed = {verdict.name: GAP.split(verdict.detail)[0] for verdict in verdicts if verdict.status == FAIL}
    declared = family_named(checkpoint_family(checkpoint)).half_precision_failures.get(checkpoint, {})
    return {"status": FAIL if failed else PASS, "failed": failed, "why": {name: declared.get(name) for name in failed}}


#: where a failure's detail turns from the identity to the size of its gap
GAP = re.compile(r": off by |: shapes differ")

#: the recurrent mixer components, most general last: the report names a mixer by the first its class is
MIXER_KINDS = ("LinearAttention", "SelectiveScan", "StateSpace", "RecurrentMixer")


def recurrent_mixers(model: Any) -> dict[str, Any] | None:
    """Which blocks of ``model`` mix tokens through a recurrent state, and which kinds of mixer they are; None where none does."""
    kinds: dict[str, list[int]] = {}
    for layer in range(model.num_layers):
        mixer = model.layers[layer].__dict__.get("linear_attn")
        if mixer is None:
            continue
        names = [klass.__name__ for klass in type(mixer).__mro__]
        kind = next((name for name in MIXER_KINDS if name in names), type(mixer).__name__)
        kinds.setdefault(kind, []).append(layer)
    return {"kinds": kinds, "blocks": model.num_layers} if kinds else None


def out_of_reach(model_type: str) -> dict[str, Any]:
    """The record of a model type no registered checkpoint covers, with why."""
    from nnterp._served import SERVED_BY
    from nnterp.registry import families

    from .reach import REASONS

    path = families().get(model_type)
    if path is not None:
        reason = f"served by {path}, but no tiny checkpoint is registered for it"
    else:
        package = next((name for name, types in SERVED_BY.items() if model_type in types), None)
        reason = (
            f"served by {package}, which is not installed"
            if package
            else REASONS.get(model_type, "no family serves it yet")
        )
    return {
        "model_type": model_type,
        "family": None,
        "status": OUT_OF_REACH,
        "checks": {},
        "unavailable": {},
        "mixture": model_type in mixture_types(),
        "reason": reason,
    }


def mapping_types() -> list[str]:
    """Every model type in transformers' causal-LM mapping."""
    import nnterp  # noqa: F401 - nnsight before transformers.models

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def merge(checked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per model type: the checkpoint named as the type, its other checkpoints as ``variants``.

    A model type passes only when every one of its checkpoints does.
    """
    by_type: dict[str, list[dict[str, Any]]] = {}
    for entry in checked:
        by_type.setdefault(entry["model_type"], []).append(entry)
    merged = []
    for model_type, entries in sorted(by_type.items()):
        entries.sort(key=lambda entry: (entry["checkpoint"] != model_type, entry["checkpoint"]))
        primary, variants = dict(entries[0]), entries[1:]
        if variants:
            primary["variants"] = variants
            failing = [entry["checkpoint"] for entry in variants if entry["status"] == FAIL]
            if failing and primary["status"] == PASS:
                primary["status"] = FAIL
                primary["reason"] = "variants fail: " + ", ".join(failing)
        merged.append(primary)
    return merged


def collect(
    progress: bool = True, checkpoints: list[str] | None = None, details: bool = False, jobs: int = 1
) -> list[dict[str, Any]]:
    """Every record: one per model type a registered checkpoint covers, then one per mapping type none does.

    ``checkpoints`` narrows the run to those registered checkpoints (default: every one); ``details`` keeps each
    failing check's detail text in its record (see ``record``), and a checkpoint that raises the frames it raised
    through (the upgrade radar's records). ``jobs`` processes share the checkpoints, each on one torch thread; the
    records are the same, in the same order, whatever the number.
    """
    from .checkpoints import names

    checkpoints = names() if checkpoints is None else list(checkpoints)
    if jobs > 1 and len(checkpoints) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        shares = [checkpoints[start::jobs] for start in range(jobs)]
        with ProcessPoolExecutor(
            jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread
        ) as pool:
            found = dict(
                zip(
                    (name for share in shares for name in share),
                    (one for part in pool.map(_checked, shares, [progress] * jobs, [details] * jobs) for one in part),
                )
            )
        checked = [found[checkpoint] for checkpoint in checkpoints]
    else:
        checked = _checked(checkpoints, progress, details)
    records = merge(checked)
    covered = {entry["model_type"] for entry in records}
    records.extend(out_of_reach(model_type) for model_type in mapping_types() if model_type not in covered)
    return records


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


#: what a broken record's ``details["raised while"]`` says (the radar's records): the load raised, or the kit after it
LOADING, CHECKING = "loading", "checking"


def _checked(checkpoints: list[str], progress: bool, details: bool) -> list[dict[str, Any]]:
    """Each checkpoint's own record, in order; a checkpoint that would not load or raised gets ``broken``'s."""
    from .runner import load

    checked = []
    for index, checkpoint in enumerate(checkpoints):
        if progress:
            print(f"[{index + 1}/{len(checkpoints)}] {checkpoint}", flush=True)
        stage = LOADING
        try:
            model = load(checkpoint)
            stage = CHECKING
            checked.append(record(model, checkpoint, details))
        except Exception as error:  # noqa: BLE001 - a release the families were not written for: the record says what broke
            checked.append(broken(checkpoint, error))
            if details:  # and where it raised, innermost last, and whether the load did
                checked[-1]["details"] = {"raised at": raised_at(error), "raised while": stage}
    return checked


def broken(checkpoint: str, error: Exception) -> dict[str, Any]:
    """The record of a checkpoint that would not load or whose checks raised: the exception, named."""
    from nnterp.registry import checkpoint_family, family_module, family_named

    from .checkpoints import spec

    return {
        "model_type": spec(checkpoint).model_type,
        "checkpoint": checkpoint,
        "family": family_module(family_named(checkpoint_family(checkpoint))),
        "status": FAIL,
        "checks": {},
        "skipped": {},
        "unavailable": {},
        "mixture": False,
        "recurrent": None,
        "reason": f"raises {type(error).__name__}: {error}",
    }


def raised_at(error: BaseException) -> list[str]:
    """The frames ``error`` passed through, outermost first, as ``file:line in function`` (``checks.base.raised_at``)."""
    from .checks.base import raised_at as frames

    return frames(error)


def vision_types() -> list[str]:
    """Every model type of transformers' image-text-to-text mapping."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
