"""The families report: for every model type, which family serves it, which checks pass, what it lacks and why.

    uv run nnterp-conformance report            # writes docs/families.json and docs/families.md
    uv run nnterp-conformance report --check    # exits non-zero if the committed files are stale

Every record is computed: the kit runs on each registered tiny checkpoint (on
the fixed prompts, so the result is the same on every run), in float32 and on a
bfloat16 load, and every other
model type of transformers' causal-LM mapping is listed with the reason it is
out of reach. Nobody edits the files by hand.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

#: the statuses a record can have
PASS, FAIL, OUT_OF_REACH = "pass", "fail", "out_of_reach"

#: the identities by which every block's stream is a sum of named terms: one stream's (``layer_input`` plus the
#: block's ``contributions()``), or several streams' (a hyper-connection's mixing)
DECOMPOSITIONS = ("contribution", "streams_follow_from_mixing")
#: the values whose reasons say why a block does not decompose, in the order they are looked at
STREAM_TERMS = ("layer_input", "self_attn.attention_output", "linear_attn.attention_output", "mlp.mlp_output", "layer_output")
#: how a post-LN family's reason for its contributions begins (``nnterp_text.families.bert``'s and its kin's)
POST_LN_REASON = "a post-LN block"
POST_LN = (
    "A post-LN block (BERT, RoBERTa and their kin, the original GPT) normalizes the stream after adding each sublayer, "
    "and a norm of a sum is no sum of terms: its layer_output has no additive decomposition, so those types pass weakly."
)


def decomposes(entry: dict[str, Any]) -> bool:
    """Whether a checkpoint's record holds a decomposition identity: every block's stream is the sum of its named terms."""
    return any(entry["checks"].get(name) == PASS for name in DECOMPOSITIONS)


def weak_passes(records: list[dict[str, Any]]) -> dict[str, str]:
    """The passing model types some of whose checkpoints do not decompose, each with why (a value's reason)."""
    found = {}
    for entry in records:
        if entry["status"] != PASS:
            continue
        for one in [entry, *entry.get("variants", [])]:
            if not decomposes(one):
                reasons = [one["unavailable"][name] for name in STREAM_TERMS if name in one["unavailable"]]
                found[entry["model_type"]] = reasons[0] if reasons else one["skipped"].get("contribution", "")
                break
    return found


def unavailable_reasons(model: Any, support: dict[str, Any] | None = None) -> dict[str, str]:
    """Each value some block lacks, with the reason (and the blocks, where not every block lacks it).

    A residual term no block has (``nnterp.reasons.ABSENT_TERMS``: nothing rescales the stream, no per-layer
    input) is no value lacking: the block's sum simply has no such term, and the report leaves it out.
    ``support`` is ``model.support()``'s table where the caller has it already.
    """
    from nnterp.reasons import ABSENT_TERMS

    found: dict[str, str] = {}
    for name, reasons in (model.support() if support is None else support).items():
        if not reasons or (isinstance(reasons, dict) and len(reasons) == model.num_layers and set(reasons.values()) <= set(ABSENT_TERMS)):
            continue
        if isinstance(reasons, str):
            found[name] = reasons
            continue
        groups: dict[str, list[int]] = {}
        for layer, reason in sorted(reasons.items()):
            groups.setdefault(reason, []).append(layer)
        everywhere = len(reasons) == model.num_layers and len(groups) == 1
        found[name] = next(iter(groups)) if everywhere else "; ".join(f"layers {layers}: {reason}" for reason, layers in groups.items())
    return found


#: the routing values of a mixture of experts, as the report names them
ROUTING = ("router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output", "shared_expert_output", "mixture_output")


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
            failing_values.update({name: found for name, found in failing_reads(model, PROMPTS).items() if name not in failing_values})
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
            ([f"fails {', '.join(failed)}"] if failed else []) + ([f"values raise: {', '.join(failing_values)}"] if failing_values else [])
        )
    if checkpoint in names() and half_precision_profile:
        entry["half_precision"] = half_precision(checkpoint)
    if details:
        entry["details"] = {verdict.name: verdict.detail for verdict in verdicts if verdict.status == FAIL}
        entry["raised_at"] = {verdict.name: verdict.raised_at for verdict in verdicts if verdict.status == FAIL and verdict.raised_at}
        entry["failing_values"] = failing_values
    return entry


#: the dtype of the report's half-precision profile
HALF = "bfloat16"


def half_precision(checkpoint: str) -> dict[str, Any]:
    """The kit on a bfloat16 load of ``checkpoint``, on the fixed prompts: pass, or the checks that fail and the
    identity each names (its detail up to the size of the gap, which depends on the machine's rounding)."""
    import torch

    from .runner import load, run

    from nnterp.registry import checkpoint_family, family_named

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
    from nnterp.registry import families

    from nnterp._served import SERVED_BY

    from .reach import REASONS

    path = families().get(model_type)
    if path is not None:
        reason = f"served by {path}, but no tiny checkpoint is registered for it"
    else:
        package = next((name for name, types in SERVED_BY.items() if model_type in types), None)
        reason = f"served by {package}, which is not installed" if package else REASONS.get(model_type, "no family serves it yet")
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
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread) as pool:
            found = dict(zip((name for share in shares for name in share), (one for part in pool.map(_checked, shares, [progress] * jobs, [details] * jobs) for one in part)))
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
        except Exception as error:  # a release the families were not written for: the record says what broke
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


def checkpoint_records(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each checked checkpoint's own record, by checkpoint name, out of the merged records."""
    found = {}
    for entry in records:
        for one in [entry, *entry.get("variants", [])]:
            if "checkpoint" in one:
                found[one["checkpoint"]] = {key: value for key, value in one.items() if key != "variants"}
    return found


def render_json(records: list[dict[str, Any]]) -> str:
    return json.dumps(records, indent=1) + "\n"


def _text(reason: str) -> str:
    """A reason as Markdown table text: brackets escaped, so ``adapter[lang](h)`` is not read as a link."""
    return reason.replace("[", "\\[").replace("|", "\\|")


def render_markdown(records: list[dict[str, Any]]) -> str:
    """The table of docs/families.md, from the records."""
    checked = [entry for entry in records if entry["status"] != OUT_OF_REACH]
    passing = [entry["model_type"] for entry in checked if entry["status"] == PASS]
    weak = weak_passes(records)
    rows = list(checkpoint_records(records).values())
    lines = [
        "# Families",
        "",
        "Generated by `uv run nnterp-conformance report` from the kit's results; do not edit.",
        "",
        f"**{len(passing)} model types pass the whole kit**: {len(passing) - len(weak)} fully, every block's stream the sum "
        f"of its named terms (a multi-stream block's streams following from their mixing), and {len(weak)} weakly, without "
        f"that decomposition (below); {len(checked)} model types "
        f"checked on {len(rows)} checkpoints, "
        f"{sum(entry['status'] == OUT_OF_REACH for entry in records)} model types of transformers' causal-LM mapping out of reach.",
        "",
        "The unavailable values leave out the residual terms no block of a checkpoint has (`layer_input_rescaling`, "
        "`layer_mid_rescaling`, `per_layer_input_output`, `layer_output_rescaling` where nothing rescales the stream and "
        "no per-layer input is added): its blocks' sums have no such term.",
        "",
        "| model type | checkpoint | family | status | checks passed | unavailable values |",
        "|---|---|---|---|---|---|",
    ]
    for entry in rows:
        checks = entry["checks"]
        passed = sum(status == PASS for status in checks.values())
        skipped = [name for name, status in checks.items() if status == "skip"]
        counts = f"{passed}/{len(checks)}" + (f" (skipped: {', '.join(skipped)})" if skipped else "")
        status = entry["status"] if entry["status"] == PASS else f"{entry['status']}: {_text(entry.get('reason', ''))}"
        by_reason: dict[str, list[str]] = {}
        for name, reason in entry["unavailable"].items():
            by_reason.setdefault(reason, []).append(f"`{name}`")
        missing = "<br>".join(f"{', '.join(names)}: {_text(reason)}" for reason, names in by_reason.items()) or "none"
        lines.append(f"| {entry['model_type']} | {entry['checkpoint']} | `{entry['family']}` | {status} | {counts} | {missing} |")
    lines += weak_section(weak)
    lines += interior_section(rows)
    lines += half_precision_section(rows)
    lines += mixture_section(records, rows)
    lines += recurrent_section(records, rows)
    lines += vision_section(rows)
    lines += ["", "## Out of reach", "", "| model type | why |", "|---|---|"]
    lines += [f"| {entry['model_type']} | {_text(entry['reason'])} |" for entry in records if entry["status"] == OUT_OF_REACH]
    return "\n".join(lines) + "\n"


def weak_section(weak: dict[str, str]) -> list[str]:
    """The passing model types whose blocks do not decompose, each with the reason a stream term gives."""
    lines = [
        "",
        "## Weak passes",
        "",
        "Each of these passes every check that applies to it, but its blocks' streams are not the sum of named terms "
        "(`contribution` skips), so `decompose_resid`, direct logit attribution and contribution patching do not run on "
        f"it. {POST_LN}",
        "",
        "| model type | why the stream does not decompose |",
        "|---|---|",
    ]
    shown = {model_type: "post-LN (above)" if reason.startswith(POST_LN_REASON) else reason for model_type, reason in weak.items()}
    return lines + [f"| {model_type} | {_text(reason)} |" for model_type, reason in sorted(shown.items())]


#: the identities that tie the values inside a block, a tower or a mapping to each other, by what they are about
INTERIOR = {
    "attention": ("scores_are_queries_against_keys", "head_outputs_are_pattern_against_values", "norm_outputs_feed_the_sublayers"),
    "gradients": ("interior_gradients_are_derivatives", "tower_gradients_are_derivatives"),
    "recurrent mixer": ("states_follow_the_rule", "head_outputs_read_the_states", "written_states_land", "state_output_is_the_last_state"),
    "vision tower": (
        "vision_scores_are_queries_against_keys",
        "vision_head_outputs_are_pattern_against_values",
        "vision_mid_stream",
        "vision_neurons_make_contribution",
        "vision_norm_outputs_feed_the_sublayers",
    ),
    "projector": ("projector_maps_its_input", "projector_reads_the_selected_stream"),
    "toolkit's mappings": ("toolkit_names_read_their_values", "toolkit_groups_sum_to_the_stream"),
}


def interior_section(rows: list[dict[str, Any]]) -> list[str]:
    """Per checkpoint, each interior identity: holds, or skipped and why; a dash where the checkpoint has no such part."""
    names = [name for group in INTERIOR.values() for name in group]
    lines = [
        "",
        "## Interior identities",
        "",
        "Each identity ties values inside a sublayer, a tower block, the projector or the toolkit's mappings to each other, or a value to its gradient (see [Adding a family](adding-a-family.md#reading-a-failing-check)): "
        + "; ".join(f"{what}: {', '.join(f'`{name}`' for name in group)}" for what, group in INTERIOR.items())
        + ". A cell is *holds*, the reason the identity skips there, or a dash where the checkpoint has no such part.",
        "",
        "| checkpoint | " + " | ".join(f"`{name}`" for name in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for entry in rows:
        cells = []
        for name in names:
            status = entry["checks"].get(name)
            cells.append("—" if status is None else "holds" if status == PASS else status if status == FAIL else _text(entry["skipped"][name]))
        lines.append(f"| {entry['checkpoint']} | " + " | ".join(cells) + " |")
    return lines


def half_precision_section(rows: list[dict[str, Any]]) -> list[str]:
    """How the kit fares on a bfloat16 load of every checkpoint that passes in float32, and why it does not where it does not."""
    passing = [entry for entry in rows if entry["status"] == PASS and "half_precision" in entry]
    failing = [entry for entry in passing if entry["half_precision"]["status"] != PASS]
    lines = [
        "",
        "## Half precision",
        "",
        f"The kit on a {HALF} load of each checkpoint that passes in float32, on the fixed prompts, with the tolerances of "
        f"`nnterp.tolerances`: **{len(passing) - len(failing)} of {len(passing)} pass**.",
    ]
    if failing:
        lines[-1] += " Where one does not, its family declares why (`half_precision_failures`):"
        lines += [
            "",
            "| checkpoint | check | the identity that does not hold | why |",
            "|---|---|---|---|",
        ]
        for entry in failing:
            for name, what in entry["half_precision"]["failed"].items():
                why = entry["half_precision"]["why"].get(name) or "not declared"
                lines.append(f"| {entry['checkpoint']} | `{name}` | {_text(what)} | {_text(why)} |")
    return lines


def mixture_section(records: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    """The table of the mixture-of-experts model types: each checkpoint's routing checks and missing routing values."""
    from .checks import CHECKS

    routing_checks = [name for name, found in CHECKS.items() if found.kind == "moe"]
    lines = [
        "",
        "## Mixtures of experts",
        "",
        f"The {len(routing_checks)} routing checks ({', '.join(f'`{name}`' for name in routing_checks)}) on every checkpoint "
        "of a model type whose transformers module defines experts.",
        "",
        "| model type | checkpoint | routing checks passed | routing values unavailable |",
        "|---|---|---|---|",
    ]
    for entry in (entry for entry in rows if entry.get("mixture")):
        ran = {name: status for name, status in entry["checks"].items() if name in routing_checks}
        if not ran:
            lines.append(f"| {entry['model_type']} | {entry['checkpoint']} | routing not served: no block of `{entry['family']}` is a routing `Moe` | |")
            continue
        passed = sum(status == PASS for status in ran.values())
        by_reason: dict[str, list[str]] = {}
        for name, reason in entry["unavailable"].items():
            if name.split(".")[-1] in ROUTING:
                by_reason.setdefault(reason, []).append(f"`{name.split('.')[-1]}`")
        missing = "<br>".join(f"{', '.join(names)}: {_text(reason)}" for reason, names in by_reason.items())
        lines.append(f"| {entry['model_type']} | {entry['checkpoint']} | {passed}/{len(routing_checks)} | {missing or 'none'} |")
    for entry in (entry for entry in records if entry.get("mixture") and entry["status"] == OUT_OF_REACH):
        lines.append(f"| {entry['model_type']} | | out of reach: {_text(entry['reason'])} | |")
    return lines


def recurrent_section(records: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    """The table of the recurrent and hybrid model types: each checkpoint's mixers and recurrent checks, and why the rest are not served."""
    from .checks import CHECKS
    from .reach import RECURRENT_KINDS

    state_checks = [name for name, found in CHECKS.items() if found.kind == "recurrent"]
    lines = [
        "",
        "## Recurrent mixers and hybrids",
        "",
        f"The {len(state_checks)} recurrent checks ({', '.join(f'`{name}`' for name in state_checks)}) on every checkpoint "
        "with a recurrent mixer (`layers[i].linear_attn`), besides the block identity on both kinds of block.",
        "",
        "| model type | checkpoint | recurrent blocks | recurrent checks passed |",
        "|---|---|---|---|",
    ]
    for entry in (entry for entry in rows if entry.get("recurrent")):
        ran = {name: status for name, status in entry["checks"].items() if name in state_checks}
        passed = sum(status == PASS for status in ran.values())
        skipped = [name for name, status in ran.items() if status == "skip"]
        kinds = "; ".join(f"`{kind}` {blocks}" for kind, blocks in entry["recurrent"]["kinds"].items())
        counts = f"{passed}/{len(state_checks)}" + (f" (skipped: {', '.join(skipped)})" if skipped else "")
        lines.append(f"| {entry['model_type']} | {entry['checkpoint']} | {_text(kinds)} of {entry['recurrent']['blocks']} | {counts} |")
    for entry in (entry for entry in records if entry["status"] == OUT_OF_REACH and entry.get("reason") in RECURRENT_KINDS):
        lines.append(f"| {entry['model_type']} | | out of reach: {_text(entry['reason'])} | |")
    return lines


def vision_types() -> list[str]:
    """Every model type of transformers' image-text-to-text mapping."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def vision_section(rows: list[dict[str, Any]]) -> list[str]:
    """The table of transformers' image-text-to-text model types: each served checkpoint's vision checks, and why the rest are not served."""
    from .checks import CHECKS
    from .reach import VISION_NOT_YET
    from .reach_vision import VISION_KINDS

    image_checks = [name for name, found in CHECKS.items() if found.kind == "vision"]
    lines = [
        "",
        "## Vision-language wrappers",
        "",
        f"The {len(image_checks)} vision checks ({', '.join(f'`{name}`' for name in image_checks)}) on every checkpoint "
        "with a vision tower (`model.vision`), each with an image of its own; then every other model type of "
        "transformers' image-text-to-text mapping.",
        "",
        "| model type | checkpoint | vision checks passed |",
        "|---|---|---|",
    ]
    served, text_only = set(), {}
    for entry in rows:
        ran = {name: status for name, status in entry["checks"].items() if name in image_checks}
        if not ran:
            text_only.setdefault(entry["model_type"], entry["checkpoint"])
            continue
        served.add(entry["model_type"])
        passed = sum(status == PASS for status in ran.values())
        skipped = [name for name, status in ran.items() if status == "skip"]
        counts = f"{passed}/{len(image_checks)}" + (f" (skipped: {', '.join(skipped)})" if skipped else "")
        lines.append(f"| {entry['model_type']} | {entry['checkpoint']} | {counts} |")
    from nnterp.registry import families

    kinds = {model_type: reason for reason, model_types in VISION_KINDS.items() for model_type in model_types}
    for model_type in (model_type for model_type in vision_types() if model_type not in served):
        path = families().get(model_type)
        served_text = f"its text model is served (checkpoint {text_only.get(model_type)} passes the text checks)"
        if model_type in kinds:
            reason = (f"{served_text}; " if model_type in text_only else "") + kinds[model_type]
        elif model_type in text_only:
            reason = f"{served_text}; its tower is not mapped yet"
        elif path:
            reason = f"served by {path}, but no tiny checkpoint is registered for it here"
        else:
            reason = VISION_NOT_YET
        lines.append(f"| {model_type} | | out of reach: {_text(reason)} |")
    return lines


HEADLINE = re.compile(r"<!-- families -->.*?<!-- /families -->", re.S)


def headline(records: list[dict[str, Any]]) -> str:
    """The README's headline line, between its markers: how many model types pass the whole kit, and how many fully."""
    passing = sum(entry["status"] == PASS for entry in records)
    weak = len(weak_passes(records))
    return (
        f"<!-- families -->**{passing} model types pass the whole kit**, {passing - weak} of them with every block's stream "
        f"the sum of its named terms ([the families table](docs/families.md))<!-- /families -->"
    )


def with_headline(readme: str, records: list[dict[str, Any]]) -> str:
    """``readme`` with its headline line replaced by the current one."""
    return HEADLINE.sub(headline(records), readme)


def write(records: list[dict[str, Any]], directory: Path, readme: Path | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "families.json").write_text(render_json(records))
    (directory / "families.md").write_text(render_markdown(records))
    if readme is not None and readme.exists():
        readme.write_text(with_headline(readme.read_text(), records))


def stale(records: list[dict[str, Any]], directory: Path) -> list[str]:
    """The committed report files that differ from what ``records`` render to."""
    rendered = {"families.json": render_json(records), "families.md": render_markdown(records)}
    return [name for name, text in rendered.items() if not (directory / name).exists() or (directory / name).read_text() != text]
