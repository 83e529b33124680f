"""The upgrade radar: what a transformers release does to the families, before anyone upgrades.

    uv run --inexact nnterp-conformance upgrade-report --transformers 5.25.0 [--checkpoint llama ...] [--jobs 2]

builds a scratch environment with that release (the nnterp distributions of
this environment, editable where they are editable here, every other
distribution held at this environment's version; one this environment lacks
and the release requires is added), runs the kit there on the chosen checkpoints (each written afresh
into the scratch environment's own checkpoint folder, since a checkpoint is
keyed by the transformers version), runs it here too (or reads a
``families.json`` given as ``--baseline``), and writes the report
(``upgrade_findings`` finds, ``upgrade_render`` writes): the counts, the
failures grouped by cause, each moved value once, a table per family with a
failing checkpoint, the distributions the release adds or moves, and the model
types it adds that no family serves. It is a report: it exits 0 whatever it
finds, and non-zero only when the scratch environment cannot be built or an
argument is wrong.

Both runs go through the hidden ``records`` subcommand, which writes the raw
records (``report.collect`` on those checkpoints, over ``--jobs`` processes,
with each failure's detail and each failing value) and the release's mappings
as JSON.
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

from .upgrade_findings import canonical, compare, new_types, package_moves, pinned
from .upgrade_render import command_line, render

#: the distribution the radar moves; every other one is held where this environment has it
MOVED = "transformers"


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


def uv() -> str:
    """The uv binary: the one running us (``uv run`` sets ``$UV``), else the one on the path."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        raise EnvironmentError("the upgrade radar builds its environment with uv, which is not on the PATH")
    return found


def freeze(python: str = sys.executable) -> str:
    """``uv pip freeze``'s output for the environment of ``python``."""
    return subprocess.run([uv(), "pip", "freeze", "--python", python], capture_output=True, text=True, check=True).stdout


def constraints(python: str = sys.executable) -> str:
    """This environment's distributions as constraints (``uv pip freeze``), less transformers and the nnterp distributions."""
    frozen = freeze(python)
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


def records(checkpoints: list[str] | None, progress: bool = True, jobs: int = 1) -> dict[str, Any]:
    """What the ``records`` subcommand writes: this release's records on ``checkpoints`` (with each failure's detail) and its mappings.

    ``jobs`` processes share the checkpoints (``report.collect``'s).
    """
    import nnterp
    import transformers

    from .report import collect, mapping_types, vision_types

    mappings = {"causal-LM": mapping_types(), "image-text-to-text": vision_types()}
    # the kit loads without the proof at load (runner.load), which on a release outside the proven series
    # would withdraw a moved value instead of letting its checks fail: the radar sees the raw failures
    return {
        "transformers": transformers.__version__,
        "nnterp": getattr(nnterp, "__version__", None),
        "records": collect(progress, checkpoints, details=True, jobs=jobs),
        "mapping_types": mappings,
        "served": served_types([model_type for types in mappings.values() for model_type in types]),
    }


def served_types(model_types: list[str]) -> list[str]:
    """Every model type a family names, and each of ``model_types`` that a family serves by its classes: a config-only
    type (5.25's ``param2moe`` builds GLM-4-MoE's classes) loads with that family, so the radar lists it as served."""
    from nnterp.registry import families, family_of_classes, mapped_classes

    named = set(families())
    by_class = {model_type for model_type in model_types if model_type not in named and family_of_classes(list(mapped_classes(model_type)))}
    return sorted(named | by_class)


def run_records(
    python: str, checkpoints: list[str] | None, out: Path, label: str, env: dict[str, str] | None = None, jobs: int = 1
) -> tuple[dict[str, Any] | None, str]:
    """Run the ``records`` subcommand under ``python``, each of its lines printed as it comes behind ``label``; its JSON, or None and its last lines."""
    command = [python, "-m", "nnterp_conformance.cli", "records", "--json", str(out), "--jobs", str(jobs)]
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


# -- the command -------------------------------------------------------------------------


def default_out(release: str) -> Path:
    """Where the report goes without ``--out``: a folder of the system's temporary directory, outside any repository."""
    return Path(tempfile.gettempdir()) / "nnterp-upgrade" / f"upgrade-report-{release}.md"


def upgrade_report(
    release: str,
    env: Path | None = None,
    checkpoints: list[str] | None = None,
    out: Path | None = None,
    baseline: Path | None = None,
    jobs: int = 1,
) -> int:
    """The ``upgrade-report`` command: build, run both sides, compare, print and write; 0 unless it could not run.

    ``jobs`` processes share the checkpoints on each side (both sides run at
    once). Without ``out`` the report goes to ``default_out``; where it went is
    the last line printed. 2 for a wrong argument, 1 where the scratch
    environment could not be built.
    """
    from .checkpoints import names

    if jobs < 1:
        print(f"--jobs takes a number of processes, 1 or more (got {jobs})", file=sys.stderr)
        return 2
    chosen = checkpoints or names()
    unknown = [name for name in chosen if name not in names()]
    if unknown:
        print(f"not registered checkpoints: {', '.join(unknown)} (nnterp-conformance list shows them)", file=sys.stderr)
        return 2
    if baseline is not None and not Path(baseline).is_file():
        print(f"--baseline {baseline}: no such file (a families.json, such as docs/families.json)", file=sys.stderr)
        return 2
    command = command_line(release, env, checkpoints, baseline, jobs, out)
    out = out or default_out(release)
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
        results[key] = run_records(python, chosen, target, label, extra, jobs)

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
    text = render(
        release, command, baseline_name, compare(old_records, new_records), new_types(new, current_types), packages(scratch), note
    )
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if env is None:
        shutil.rmtree(scratch, ignore_errors=True)
        print("the scratch environment was a temporary folder, now removed: pass --env DIR to keep it")
    else:
        print(f"the scratch environment is kept in {scratch}")
    print(f"wrote {out}")
    return 0


def packages(scratch: Path) -> list[tuple[str, str | None, str | None]] | None:
    """The distributions the scratch environment adds, lacks or has at another version than this one; None where a freeze failed.

    What it lacks is counted only among what the nnterp distributions require here (``required``): the
    scratch environment never had this one's development tools, and their absence is no move of the release's.
    """
    try:
        here, there = pinned(freeze()), pinned(freeze(str(scratch_python(scratch))))
    except (subprocess.CalledProcessError, OSError):
        return None
    needed = required([name for name, _, _ in nnterp_distributions()])
    return package_moves({name: version for name, version in here.items() if name in needed or name in there}, there)


def required(roots: list[str]) -> set[str]:
    """The canonical names of ``roots`` and every distribution they require in this environment, transitively (no extras
    but those a requirement asks for), as ``uv pip install -e`` of the roots installs them."""
    from packaging.requirements import Requirement  # transformers requires packaging, so it is here

    found: set[str] = set()
    queue: list[tuple[str, frozenset[str]]] = [(canonical(root), frozenset()) for root in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while queue:
        name, extras = queue.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.add(name)
        for line in distribution.requires or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(environment) for environment in environments):
                queue.append((canonical(requirement.name), frozenset(requirement.extras)))
    return found


def _unrun(checkpoint: str, error: str) -> dict[str, Any]:
    from nnterp.registry import checkpoint_family, family_module, family_named

    family = family_module(family_named(checkpoint_family(checkpoint)))
    return {"checkpoint": checkpoint, "family": family, "status": "fail", "checks": {}, "reason": f"raises {error}"}


def records_command(checkpoints: list[str] | None, out: Path, jobs: int = 1) -> int:
    """The hidden ``records`` subcommand: the raw records of this environment's release, as JSON into ``out``."""
    found = records(checkpoints, jobs=jobs)
    out.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {out}", flush=True)
    return 0
