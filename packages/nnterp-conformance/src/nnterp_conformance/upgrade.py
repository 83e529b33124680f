"""The upgrade radar: what a transformers release does to the families, before anyone upgrades.

    uv run --inexact nnterp-conformance upgrade-report --transformers 5.25.0 [--checkpoint llama ...]

builds a scratch environment with that release (the nnterp distributions of
this environment, editable where they are editable here, every other
distribution held at this environment's version), runs the kit there on the
chosen checkpoints (each written afresh into the scratch environment's own
checkpoint folder, since a checkpoint is keyed by the transformers version),
runs it here too (or reads a ``families.json`` given as ``--baseline``), and
writes one table per family: the checkpoints that still pass, the values whose
pinned operation moved (parsed from ``SourceNotAvailable``), the identities that
newly fail, the checkpoints that no longer load; then the model types the
release adds to the causal-LM and image-text-to-text mappings that no family
serves. It is a report: it exits 0 whatever it finds, and non-zero only when
the scratch environment cannot be built.

Both runs go through the hidden ``records`` subcommand, which writes the raw
records (``report.collect`` on those checkpoints, with each failing check's
detail) and the release's mappings as JSON.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse

#: the distribution the radar moves; every other one is held where this environment has it
MOVED = "transformers"
#: what a radar record calls a checkpoint in each state
PASSES, MOVED_VALUE, NEWLY_FAILING, STILL_FAILING, NO_LONGER_LOADS, NOT_IN_BASELINE = (
    "passes", "moved", "newly failing", "still failing", "no longer loads", "failing, unchecked in the baseline",
)

#: ``nnterp.errors.SourceNotAvailable``'s message: the value, the path it pins, the operation it lacks, the operations it has
SOURCE_NOT_AVAILABLE = re.compile(
    r"(?P<value>\S+) is pinned to (?P<q>['\"])(?P<path>.*?)(?P=q), but the forward has no operation "
    r"(?P<q2>['\"])(?P<operation>.*?)(?P=q2); the operations it has now: (?P<available>[^\n]*)"
)


# -- the scratch environment ------------------------------------------------------------


def nnterp_distributions() -> list[tuple[str, str, Path | None]]:
    """Each nnterp distribution installed here: its name, its version, and its source directory where it is installed editable."""
    found = {}
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"]
        if not name or not canonical(name).startswith("nnterp"):
            continue
        source = None
        text = distribution.read_text("direct_url.json")
        if text:
            direct = json.loads(text)
            if direct.get("dir_info", {}).get("editable") and direct.get("url", "").startswith("file://"):
                source = Path(unquote(urlparse(direct["url"]).path))
        found[canonical(name)] = (name, distribution.version, source)
    return sorted(found.values())


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def uv() -> str:
    """The uv binary: the one running us (``uv run`` sets ``$UV``), else the one on the path."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        raise EnvironmentError("the upgrade radar builds its environment with uv, which is not on the PATH")
    return found


def constraints(python: str = sys.executable) -> str:
    """This environment's distributions as constraints (``uv pip freeze``), less transformers and the nnterp distributions."""
    frozen = subprocess.run([uv(), "pip", "freeze", "--python", python], capture_output=True, text=True, check=True).stdout
    kept = []
    for line in frozen.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e ", "--")):
            continue
        name = canonical(re.split(r"[=<>~!@ \[;]", line, maxsplit=1)[0])
        if name == MOVED or name.startswith("nnterp"):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def install_arguments(release: str, scratch: Path) -> list[str]:
    """``uv pip install``'s arguments into ``scratch``: the constraints and the override files, then the nnterp distributions."""
    (scratch / "constraints.txt").write_text(constraints())
    (scratch / "overrides.txt").write_text(f"{MOVED}=={release}\n")
    arguments = ["-c", str(scratch / "constraints.txt"), "--override", str(scratch / "overrides.txt")]
    for name, version, source in nnterp_distributions():
        arguments += ["-e", str(source)] if source is not None else [f"{name}=={version}"]
    return arguments


def scratch_python(scratch: Path) -> Path:
    return scratch / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def build(release: str, scratch: Path, say: Callable[[str], None] = print) -> str | None:
    """Make ``scratch`` a virtual environment with ``transformers==release``; None, or uv's message where it could not be built.

    An existing environment there is reused: the install then only moves what differs.
    """
    python = scratch_python(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        say(f"creating {scratch} (python {sys.executable})")
        made = subprocess.run([uv(), "venv", "-q", str(scratch), "--python", sys.executable], capture_output=True, text=True)
        if made.returncode:
            return made.stderr.strip() or made.stdout.strip()
    arguments = install_arguments(release, scratch)
    say(f"installing {MOVED}=={release} and the nnterp distributions into {scratch}, everything else held at this environment's versions")
    installed = subprocess.run([uv(), "pip", "install", "-q", "--python", str(python), *arguments], capture_output=True, text=True)
    if installed.returncode:
        return installed.stderr.strip() or installed.stdout.strip()
    found = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({MOVED!r}))"], capture_output=True, text=True)
    if found.returncode or found.stdout.strip() != release:
        return f"the scratch environment has {MOVED} {found.stdout.strip() or found.stderr.strip()!r}, not {release}"
    return None


# -- the records, in either environment -------------------------------------------------


def records(checkpoints: list[str] | None, progress: bool = True) -> dict[str, Any]:
    """What the ``records`` subcommand writes: this release's records on ``checkpoints`` (with each failure's detail) and its mappings."""
    import nnterp
    import transformers
    from nnterp.registry import families

    from .report import collect, mapping_types, vision_types

    # the kit loads without the proof at load (runner.load), which on a release outside the proven series
    # would withdraw a moved value instead of letting its checks fail: the radar sees the raw failures
    return {
        "transformers": transformers.__version__,
        "nnterp": getattr(nnterp, "__version__", None),
        "records": collect(progress, checkpoints, details=True),
        "mapping_types": {"causal-LM": mapping_types(), "image-text-to-text": vision_types()},
        "served": sorted(families()),
    }


def run_records(python: str, checkpoints: list[str] | None, out: Path, label: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """Run the ``records`` subcommand under ``python``, each of its lines printed as it comes behind ``label``; its JSON, or None and its last lines."""
    command = [python, "-m", "nnterp_conformance.cli", "records", "--json", str(out)]
    for checkpoint in checkpoints or []:
        command += ["--checkpoint", checkpoint]
    environment = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    tail: collections.deque[str] = collections.deque(maxlen=30)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    assert process.stdout is not None
    for line in process.stdout:
        tail.append(line.rstrip())
        print(f"[{label}] {line.rstrip()}", flush=True)
    process.wait()
    if process.returncode == 0 and out.exists():
        return json.loads(out.read_text()), ""
    return None, "\n".join(tail)


def by_checkpoint(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The checked checkpoints' own records, by name (a ``families.json`` or the radar's records)."""
    from .report import checkpoint_records

    return checkpoint_records(found)


# -- the comparison ----------------------------------------------------------------------


def parse_moved(text: str) -> dict[str, Any] | None:
    """The value, pinned path, missing operation and operations there now, out of a ``SourceNotAvailable`` message in ``text``; None where none is."""
    found = SOURCE_NOT_AVAILABLE.search(text or "")
    if found is None:
        return None
    listing = found["available"].strip()
    available = [] if listing == "(none)" else [name.strip() for name in listing.split(",") if name.strip()]
    return {"value": found["value"], "path": found["path"], "operation": found["operation"], "available": available}


def broken_reason(entry: dict[str, Any]) -> str | None:
    """The exception of a record ``report.broken`` wrote (a checkpoint that no longer loads); None for a record of checks."""
    reason = entry.get("reason") or ""
    return reason[len("raises "):] if not entry.get("checks") and reason.startswith("raises ") else None


def compare(baseline: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per family, one row per finding on each checkpoint of ``new`` against its record in ``baseline`` (both by checkpoint).

    A row is ``{"checkpoint", "kind", ...}``: ``passes``; ``moved`` (a value whose pinned operation is gone, with the
    checks it failed); ``newly failing`` (a check that passes in the baseline, with its detail); ``still failing``
    (checks that fail in both); ``no longer loads`` (the exception). A checkpoint the baseline lacks, or that did not
    load there, has its failures as ``failing, unchecked in the baseline``.
    """
    rows: dict[str, list[dict[str, Any]]] = {}
    for checkpoint, entry in sorted(new.items()):
        old = baseline.get(checkpoint)
        family = rows.setdefault(entry["family"] or "(no family)", [])
        error = broken_reason(entry)
        if error is not None:
            moved = parse_moved(error)
            if moved is not None:
                family.append({"checkpoint": checkpoint, "kind": MOVED_VALUE, **moved, "checks": ["(at load)"]})
            else:
                where = _where(entry.get("details", {}).get("raised at", []))
                family.append({"checkpoint": checkpoint, "kind": NO_LONGER_LOADS, "detail": error, "where": where, "before": _before(old)})
            continue
        details = entry.get("details", {})
        failing = [name for name, status in entry["checks"].items() if status == "fail"]
        moves: dict[tuple[str, str, str], dict[str, Any]] = {}
        still = []
        for name in failing:
            detail = details.get(name, "")
            moved = parse_moved(detail)
            if moved is not None:
                key = (moved["value"], moved["path"], moved["operation"])
                moves.setdefault(key, {"checkpoint": checkpoint, "kind": MOVED_VALUE, **moved, "checks": []})["checks"].append(name)
            elif old is None or broken_reason(old) is not None:
                family.append({"checkpoint": checkpoint, "kind": NOT_IN_BASELINE, "check": name, "detail": detail})
            elif old.get("checks", {}).get(name, "pass") == "pass":  # passed there, or did not apply there
                family.append({"checkpoint": checkpoint, "kind": NEWLY_FAILING, "check": name, "detail": detail})
            else:
                still.append(name)
        family.extend(moves.values())
        if still:
            family.append({"checkpoint": checkpoint, "kind": STILL_FAILING, "checks": still})
        if not failing:
            checks = entry["checks"]
            passed = sum(status == "pass" for status in checks.values())
            skipped = len(checks) - passed
            counts = f"{passed}/{len(checks)} checks pass" + (f", {skipped} skip{'s' if skipped == 1 else ''}" if skipped else "")
            family.append({"checkpoint": checkpoint, "kind": PASSES, "detail": counts, "before": _before(old)})
    order = [PASSES, MOVED_VALUE, NEWLY_FAILING, NOT_IN_BASELINE, STILL_FAILING, NO_LONGER_LOADS]
    for family in rows.values():
        family.sort(key=lambda row: (order.index(row["kind"]), row["checkpoint"]))
    return dict(sorted(rows.items()))


def _where(frames: list[str]) -> list[str]:
    """Where an exception was raised, for the table: the innermost frame in nnterp's code, then the innermost of all, shortened."""
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


def new_types(new: dict[str, Any], current: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The model types the new release's mappings add to ``current``'s that no family serves: (model type, mapping)."""
    served = set(new.get("served", []))
    found = []
    for mapping, types in new.get("mapping_types", {}).items():
        before = set(current.get(mapping, []))
        found += [(model_type, mapping) for model_type in types if model_type not in before and model_type not in served]
    return sorted(found)


# -- the table ---------------------------------------------------------------------------


def render(
    release: str,
    baseline_name: str,
    rows: dict[str, list[dict[str, Any]]],
    added: list[tuple[str, str]],
    note: str | None = None,
) -> str:
    """The radar's Markdown: a table per family, then the new model types no family serves."""
    from .report import _text

    counts = collections.Counter(row["kind"] for family in rows.values() for row in family)
    checkpoints = {row["checkpoint"] for family in rows.values() for row in family}
    passing = {row["checkpoint"] for family in rows.values() for row in family if row["kind"] == PASSES}
    lines = [
        f"# Upgrade report: transformers {release}",
        "",
        f"Generated by `uv run --inexact nnterp-conformance upgrade-report --transformers {release}`, against {baseline_name}. "
        f"**{len(passing)} of {len(checkpoints)} checkpoints pass**; moved values: {counts[MOVED_VALUE]}, "
        f"newly failing identities: {counts[NEWLY_FAILING]}, checkpoints that no longer load: {counts[NO_LONGER_LOADS]}.",
    ]
    if note:
        lines += ["", note]
    for family, found in rows.items():
        lines += ["", f"## `{family}`", "", "| checkpoint | finding | detail |", "|---|---|---|"]
        for row in found:
            if row["kind"] == PASSES:
                detail = row["detail"] + ("" if row["before"] == "passed" else f" (baseline: {_text(row['before'])})")
            elif row["kind"] == MOVED_VALUE:
                available = ", ".join(f"`{name}`" for name in row["available"]) or "(none)"
                detail = (
                    f"`{row['value']}` is pinned to `{row['path']}`; operation `{row['operation']}` is gone. "
                    f"Operations there now: {available}. Fails {', '.join(f'`{name}`' for name in row['checks'])}"
                )
            elif row["kind"] in (NEWLY_FAILING, NOT_IN_BASELINE):
                detail = f"`{row['check']}`: {_text(_one_line(row['detail']))}"
            elif row["kind"] == STILL_FAILING:
                detail = "fail in the baseline too: " + ", ".join(f"`{name}`" for name in row["checks"])
            else:
                where = f"; raised at {', '.join(f'`{frame}`' for frame in row.get('where', []))}" if row.get("where") else ""
                detail = _text(_one_line(row["detail"])) + where + f" (baseline: {_text(row['before'])})"
            lines.append(f"| {row['checkpoint']} | {row['kind']} | {detail} |")
    lines += ["", "## New model types no family serves", ""]
    if added:
        lines += ["| model type | mapping |", "|---|---|"] + [f"| {model_type} | {mapping} |" for model_type, mapping in added]
    else:
        lines.append("None: every model type the release adds to the causal-LM and image-text-to-text mappings is served.")
    return "\n".join(lines) + "\n"


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the command -------------------------------------------------------------------------


def upgrade_report(
    release: str,
    env: Path | None = None,
    checkpoints: list[str] | None = None,
    out: Path | None = None,
    baseline: Path | None = None,
) -> int:
    """The ``upgrade-report`` command: build, run both sides, compare, print and write; 0 unless the environment could not be built."""
    from .checkpoints import names

    chosen = checkpoints or names()
    unknown = [name for name in chosen if name not in names()]
    if unknown:
        print(f"not registered checkpoints: {', '.join(unknown)} (nnterp-conformance list shows them)", file=sys.stderr)
        return 2
    out = out or Path(f"upgrade-report-{release}.md")
    scratch = env or Path(tempfile.mkdtemp(prefix=f"nnterp-upgrade-{release}-"))
    scratch = scratch.resolve()
    started = time.monotonic()
    failure = build(release, scratch)
    if failure is not None:
        print(f"could not build the scratch environment with transformers {release} in {scratch}:\n{failure}", file=sys.stderr)
        return 1
    print(f"scratch environment ready in {time.monotonic() - started:.0f} s: {scratch}", flush=True)

    from .report import mapping_types, vision_types

    current_types = {"causal-LM": mapping_types(), "image-text-to-text": vision_types()}
    import transformers

    here = transformers.__version__
    results: dict[str, Any] = {}

    def side(key: str, python: str, target: Path, label: str, extra: dict[str, str] | None = None) -> None:
        results[key] = run_records(python, chosen, target, label, extra)

    threads = [
        threading.Thread(
            target=side,
            args=("new", str(scratch_python(scratch)), scratch / "records.json", release, {"NNTERP_CHECKPOINTS": str(scratch / "checkpoints")}),
        )
    ]
    if baseline is None:
        threads.append(threading.Thread(target=side, args=("old", sys.executable, scratch / f"records-{here}.json", here)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    if baseline is not None:
        old_records = by_checkpoint(json.loads(Path(baseline).read_text()))
        baseline_name = f"`{baseline}`"
    else:
        old, tail = results["old"]
        if old is None:
            print(f"the kit did not run in this environment (transformers {here}):\n{tail}", file=sys.stderr)
            old_records = {}
        else:
            old_records = by_checkpoint(old["records"])
        baseline_name = f"transformers {here} (this environment)"
    old_records = {name: entry for name, entry in old_records.items() if name in chosen}

    new, tail = results["new"]
    note = None
    if new is None:
        # the kit itself did not start there (an import that broke): every checkpoint no longer loads, with why
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), "the records command failed")
        note = f"The kit did not run in transformers {release}; its last lines:\n\n```\n{tail}\n```"
        new_records = {name: _unrun(name, last) for name in chosen}
        new = {}
    else:
        new_records = by_checkpoint(new["records"])
    rows = compare(old_records, new_records)
    text = render(release, baseline_name, rows, new_types(new, current_types), note)
    print(text)
    out.write_text(text)
    if env is None:
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"wrote {out} (the scratch environment was a temporary folder: pass --env DIR to keep it)")
    else:
        print(f"wrote {out}; the scratch environment is kept in {scratch}")
    return 0


def _unrun(checkpoint: str, error: str) -> dict[str, Any]:
    from nnterp.registry import checkpoint_family, family_module, family_named

    family = family_module(family_named(checkpoint_family(checkpoint)))
    return {"checkpoint": checkpoint, "family": family, "status": "fail", "checks": {}, "reason": f"raises {error}"}


def records_command(checkpoints: list[str] | None, out: Path) -> int:
    """The hidden ``records`` subcommand: the raw records of this environment's release, as JSON into ``out``."""
    found = records(checkpoints)
    out.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {out}", flush=True)
    return 0
