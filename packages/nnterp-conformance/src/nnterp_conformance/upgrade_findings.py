"""What the upgrade radar finds in two releases' records: per checkpoint what moved or fails, the causes, the packages.

``compare`` turns the records into findings (rows), ``causes`` groups the failing
ones by what raised and where, ``tally`` counts them for the headline, and
``package_moves`` says which distributions the release adds, removes or moves.
``upgrade_render`` writes them as Markdown; ``upgrade`` runs the two sides.
"""

from __future__ import annotations

import re
from typing import Any

from .report import GAP, LOADING

#: what a finding calls a checkpoint, a check or a value in each state
PASSES, MOVED_VALUE, NEWLY_FAILING, STILL_FAILING, NO_LONGER_LOADS, NOT_IN_BASELINE, VALUE_RAISES, RAISES_CHECKED = (
    "passes",
    "moved",
    "newly failing",
    "still failing",
    "no longer loads",
    "failing, unchecked in the baseline",
    "value raises",
    "raises while checked",
)
#: the order findings come in, per family and per checkpoint
ORDER = (
    PASSES,
    MOVED_VALUE,
    NEWLY_FAILING,
    VALUE_RAISES,
    NOT_IN_BASELINE,
    STILL_FAILING,
    RAISES_CHECKED,
    NO_LONGER_LOADS,
)
#: the findings that are failures the release may have caused (the summary groups them by cause)
FAILURES = (MOVED_VALUE, NEWLY_FAILING, VALUE_RAISES, NOT_IN_BASELINE, RAISES_CHECKED, NO_LONGER_LOADS)
#: what a failure that is no exception (an identity the kit found not to hold) has in place of a type
IDENTITY = "identity does not hold"

#: ``nnterp.errors.SourceNotAvailable``'s message: the value, the path it pins, the operation it lacks, the operations it has
#: (a value's name may hold a space: ``StateSpace.chunk states``; what comes before it ends in ": ")
SOURCE_NOT_AVAILABLE = re.compile(
    r"(?:^|: )(?P<value>[^:\n]+?) is pinned to (?P<q>['\"])(?P<path>.*?)(?P=q), but the forward has no operation "
    r"(?P<q2>['\"])(?P<operation>.*?)(?P=q2); the operations it has now: (?P<available>[^\n]*)"
)
#: an exception as the records write it: ``Type: message``
EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*): (?P<message>.*)$", re.S)


def parse_moved(text: str) -> dict[str, Any] | None:
    """The value, pinned path, missing operation and operations there now, out of a ``SourceNotAvailable`` message in ``text``; None where none is."""
    found = SOURCE_NOT_AVAILABLE.search(text or "")
    if found is None:
        return None
    listing = found["available"].strip()
    available = [] if listing == "(none)" else [name.strip() for name in listing.split(",") if name.strip()]
    return {"value": found["value"], "path": found["path"], "operation": found["operation"], "available": available}


def broken_reason(entry: dict[str, Any]) -> str | None:
    """The exception of a record ``report.broken`` wrote (a checkpoint that would not load, or raised in the kit); None for a record of checks."""
    reason = entry.get("reason") or ""
    return reason[len("raises ") :] if not entry.get("checks") and reason.startswith("raises ") else None


def compare(baseline: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per family, the findings on each checkpoint of ``new`` against its record in ``baseline`` (both by checkpoint).

    A finding is ``{"checkpoint", "kind", ...}``: ``passes``; ``moved`` (a value whose pinned operation is gone,
    with the checks it failed and the values whose reason or read raised it); ``newly failing`` (a check that passes
    in the baseline, with its detail); ``value raises`` (a value whose reason or read raises anything else);
    ``still failing`` (checks and values that fail in both); ``no longer loads`` (the load raised);
    ``raises while checked`` (the load went through, the kit raised after it). A checkpoint the baseline lacks,
    or that did not load there, has its failing checks as ``failing, unchecked in the baseline``.
    """
    rows: dict[str, list[dict[str, Any]]] = {}
    for checkpoint, entry in sorted(new.items()):
        rows.setdefault(entry["family"] or "(no family)", []).extend(
            findings(checkpoint, entry, baseline.get(checkpoint))
        )
    for family in rows.values():
        family.sort(key=lambda row: (ORDER.index(row["kind"]), row["checkpoint"]))
    return dict(sorted(rows.items()))


def findings(checkpoint: str, entry: dict[str, Any], old: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One checkpoint's findings (see ``compare``)."""
    error = broken_reason(entry)
    if error is not None:
        details = entry.get("details", {})
        stage = details.get("raised while", LOADING)
        moved = parse_moved(error)
        if moved is not None:
            return [
                {
                    "checkpoint": checkpoint,
                    "kind": MOVED_VALUE,
                    **moved,
                    "checks": [],
                    "reads": [],
                    "raised_while": stage,
                }
            ]
        kind = NO_LONGER_LOADS if stage == LOADING else RAISES_CHECKED
        return [
            {
                "checkpoint": checkpoint,
                "kind": kind,
                "detail": error,
                "where": _where(details.get("raised at", [])),
                "before": _before(old),
            }
        ]
    details, frames = entry.get("details", {}), entry.get("raised_at", {})
    # the baseline's entry where it checked this checkpoint; None where it has none or the checkpoint did not load there
    checked = None if old is None or broken_reason(old) is not None else old
    found: list[dict[str, Any]] = []
    moves: dict[tuple[str, str, str], dict[str, Any]] = {}
    still: dict[str, list[str]] = {"checks": [], "values": []}
    failing = [name for name, status in entry["checks"].items() if status == "fail"]
    for name in failing:
        detail = details.get(name, "")
        moved = parse_moved(detail)
        if moved is not None:
            _moved(moves, checkpoint, moved)["checks"].append(name)
        elif checked is not None and checked.get("checks", {}).get(name, "pass") != "pass":  # failed there too
            still["checks"].append(name)
        else:  # passed there, did not apply there, or the baseline did not check it
            kind = NOT_IN_BASELINE if checked is None else NEWLY_FAILING
            found.append(
                {
                    "checkpoint": checkpoint,
                    "kind": kind,
                    "check": name,
                    "detail": detail,
                    "where": _where(frames.get(name, [])),
                    "crashed": name in frames,
                }
            )
    before = (old or {}).get("failing_values", {})
    for value, failure in entry.get("failing_values", {}).items():
        moved = parse_moved(failure["error"])
        if moved is not None:
            _moved(moves, checkpoint, moved)["reads"].append(value)
        elif value in before:
            still["values"].append(value)
        else:
            found.append(
                {
                    "checkpoint": checkpoint,
                    "kind": VALUE_RAISES,
                    "value": value,
                    "detail": failure["error"],
                    "while": failure["while"],
                    "layers": failure.get("layers"),
                    "where": _where(failure.get("raised at", [])),
                }
            )
    found += moves.values()
    if still["checks"] or still["values"]:
        found.append({"checkpoint": checkpoint, "kind": STILL_FAILING, **still})
    if not failing and not entry.get("failing_values"):
        checks = entry["checks"]
        passed = sum(status == "pass" for status in checks.values())
        found.append(
            {"checkpoint": checkpoint, "kind": PASSES, "passed": passed, "checks": len(checks), "before": _before(old)}
        )
    return found


def _moved(moves: dict[tuple[str, str, str], dict[str, Any]], checkpoint: str, moved: dict[str, Any]) -> dict[str, Any]:
    """The one finding of a moved value on a checkpoint, however many checks and reads it broke."""
    key = (moved["value"], moved["path"], moved["operation"])
    return moves.setdefault(key, {"checkpoint": checkpoint, "kind": MOVED_VALUE, **moved, "checks": [], "reads": []})


def _where(frames: list[str]) -> list[str]:
    """Where an exception was raised, for the report: the innermost frame in nnterp's code, then the innermost of all, shortened."""
    short = [_short(frame) for frame in frames]
    ours = [frame for frame in short if frame.startswith("nnterp")]
    return list(dict.fromkeys(ours[-1:] + short[-1:]))


def _short(frame: str) -> str:
    """``.../site-packages/transformers/x.py:3 in f`` -> ``transformers/x.py:3 in f``; ``.../src/nnterp/y.py`` -> ``nnterp/y.py``."""
    path, _, rest = frame.partition(":")
    for marker in ("/site-packages/", "/src/", "/lib/python"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    return f"{path}:{rest}"


def _before(old: dict[str, Any] | None) -> str:
    """What the baseline said of a checkpoint, in a few words."""
    if old is None:
        return "not in the baseline"
    if broken_reason(old) is not None:
        return "did not load"
    return "passed" if old.get("status") == "pass" else old.get("reason", "failed")


# -- causes and counts -------------------------------------------------------------------


def cause(row: dict[str, Any]) -> tuple[str, str, str]:
    """A failing finding's cause: the exception type (or ``IDENTITY``), the message's pattern, and where it was raised.

    The pattern is the message's first line without what varies between checkpoints
    (block indices, numbers, the size of a gap); where is the innermost frame in
    nnterp's code (else the innermost of all). A moved value's cause is the
    operation it was pinned to, whichever component's value it is (a kernel call
    several families share moves for all of them).
    """
    if row["kind"] == MOVED_VALUE:
        return (
            "SourceNotAvailable",
            f"values are pinned to operation {row['operation']!r}, which the forward no longer has",
            "",
        )
    where = (row.get("where") or [""])[0]
    exception = (
        EXCEPTION.match(row["detail"])
        if row["kind"] not in (NEWLY_FAILING, NOT_IN_BASELINE) or row.get("crashed")
        else None
    )
    if exception is None:
        return IDENTITY, pattern(row["detail"]), where
    return exception["type"], pattern(exception["message"]), where


def pattern(message: str, limit: int = 240) -> str:
    """A message's first line, its block indices and numbers replaced (``layers[i]``, ``N``) and the size of a gap dropped."""
    lines = str(message).strip().splitlines()
    text = GAP.split(lines[0] if lines else "")[0]
    text = re.sub(r"\[\d+\]", "[i]", text)
    text = re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])", "N", text)
    return one_line(text, limit)


def gap(detail: str) -> str:
    """The size of the gap a failing identity's detail ends with (``off by 0.5``), or ''."""
    found = GAP.search(detail or "")
    return one_line(detail[found.start() + 2 :], 80) if found else ""


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def causes(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The failing findings grouped by ``cause``, most checkpoints first: each group's cause, checkpoints and findings."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in (row for family in rows.values() for row in family if row["kind"] in FAILURES):
        kind, message, where = cause(row)
        group = groups.setdefault(
            (kind, message, where), {"type": kind, "pattern": message, "where": row.get("where") or [], "rows": []}
        )
        group["rows"].append(row)
    found = list(groups.values())
    for group in found:
        group["checkpoints"] = sorted({row["checkpoint"] for row in group["rows"]})
    found.sort(key=lambda group: (-len(group["checkpoints"]), -len(group["rows"]), group["type"], group["pattern"]))
    return found


def subject(row: dict[str, Any]) -> str:
    """What a finding is about: the check, the value, or nothing (a checkpoint that no longer loads)."""
    return row.get("check") or row.get("value") or ""


def tally(rows: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """The headline's counts, each of one unit: checkpoints, values (each once, on however many checkpoints) or checks."""
    flat = [row for family in rows.values() for row in family]

    def of(kind: str) -> list[dict[str, Any]]:
        return [row for row in flat if row["kind"] == kind]

    checkpoints = {row["checkpoint"] for row in flat}
    return {
        "checkpoints": len(checkpoints),
        "passing": len({row["checkpoint"] for row in of(PASSES)}),
        "no_longer_load": len({row["checkpoint"] for row in of(NO_LONGER_LOADS)}),
        "raise_checked": len({row["checkpoint"] for row in of(RAISES_CHECKED)}),
        "moved_values": len({(row["value"], row["operation"]) for row in of(MOVED_VALUE)}),
        "moved_checkpoints": len({row["checkpoint"] for row in of(MOVED_VALUE)}),
        "newly_failing_checks": len({row["check"] for row in of(NEWLY_FAILING)}),
        "newly_failing_checkpoints": len({row["checkpoint"] for row in of(NEWLY_FAILING)}),
        "raising_values": len({row["value"] for row in of(VALUE_RAISES)}),
        "raising_checkpoints": len({row["checkpoint"] for row in of(VALUE_RAISES)}),
        "unchecked_checks": len({row["check"] for row in of(NOT_IN_BASELINE)}),
        "unchecked_checkpoints": len({row["checkpoint"] for row in of(NOT_IN_BASELINE)}),
    }


# -- packages and model types ------------------------------------------------------------


def pinned(frozen: str) -> dict[str, str]:
    """``uv pip freeze``'s output as {canonical name: version}: ``name==version``, or ``@ url`` for a direct reference.

    Editable installs (``-e``: the nnterp distributions, the same source on both sides) are left out.
    """
    found = {}
    for line in frozen.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e ", "--")):
            continue
        if "==" in line:
            name, _, version = line.partition("==")
            version = version.split(";")[0].strip()
        else:
            name, _, url = line.partition(" @ ")
            version = f"@ {url.strip()}" if url else ""
        found[canonical(name.split("[")[0].strip())] = version
    return found


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def package_moves(here: dict[str, str], there: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    """Each distribution the scratch environment adds, lacks or has at another version: (name, here, there), by name."""
    return [
        (name, here.get(name), there.get(name))
        for name in sorted(here.keys() | there.keys())
        if here.get(name) != there.get(name)
    ]


def new_types(new: dict[str, Any], current: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The model types the new release's mappings add to ``current``'s that no family serves: (model type, mapping)."""
    served = set(new.get("served", []))
    found = []
    for mapping, types in new.get("mapping_types", {}).items():
        before = set(current.get(mapping, []))
        found += [
            (model_type, mapping) for model_type in types if model_type not in before and model_type not in served
        ]
    return sorted(found)
