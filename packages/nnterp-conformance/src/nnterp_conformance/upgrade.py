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
This module is the command; ``upgrade_env`` builds the scratch environment and
``upgrade_records`` runs the kit in either one.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .upgrade_env import MOVED as MOVED
from .upgrade_env import build as build
from .upgrade_env import constraints as constraints
from .upgrade_env import freeze as freeze
from .upgrade_env import install_arguments as install_arguments
from .upgrade_env import nnterp_distributions as nnterp_distributions
from .upgrade_env import packages as packages
from .upgrade_env import required as required
from .upgrade_env import scratch_python as scratch_python
from .upgrade_env import uv as uv
from .upgrade_findings import compare, new_types
from .upgrade_records import by_checkpoint as by_checkpoint
from .upgrade_records import records as records
from .upgrade_records import records_command as records_command
from .upgrade_records import run_records as run_records
from .upgrade_records import served_types as served_types
from .upgrade_records import unrun
from .upgrade_render import command_line, render


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
        print(
            f"could not build the scratch environment with transformers {release} in {scratch}:\n{failure}",
            file=sys.stderr,
        )
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
            args=(
                "new",
                str(scratch_python(scratch)),
                scratch / "records.json",
                release,
                {"NNTERP_CHECKPOINTS": str(scratch / "checkpoints")},
            ),
        )
    ]
    if baseline is None:
        threads.append(
            threading.Thread(target=side, args=("old", sys.executable, scratch / f"records-{here}.json", here))
        )
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
        new_records = {name: unrun(name, last) for name in chosen}
        new = {}
    else:
        new_records = by_checkpoint(new["records"])
    text = render(
        release,
        command,
        baseline_name,
        compare(old_records, new_records),
        new_types(new, current_types),
        packages(scratch),
        note,
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
