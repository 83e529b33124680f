"""Start-up: how long the first command takes, against the bare import of what nnterp stands on.

    uv run python benchmarks/startup.py --write    # regenerates the start-up rows of benchmarks/README.md

Every figure is a fresh process (the tiny checkpoint already written, the
bytecode compiled), run ``--repeats`` times with the variants interleaved;
the table gives medians and each row's ratio to the bare import. The phases
split one ``check gpt2`` process with ``time.perf_counter`` around each step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = Path(__file__).resolve().parent / "README.md"
BEGIN, END = "<!-- startup -->", "<!-- /startup -->"

COMMANDS = {
    "bare `import torch, transformers, nnsight`": [sys.executable, "-c", "import torch, transformers, nnsight"],
    "`import nnterp`": [sys.executable, "-c", "import nnterp"],
    "`nnterp-conformance check gpt2`": [str(Path(sys.executable).parent / "nnterp-conformance"), "check", "gpt2"],
}

#: one ``check gpt2`` process, step by step (printed as JSON: seconds per phase)
PHASES = r"""
import json, sys, time
marks = [time.perf_counter()]
import torch, transformers, nnsight
marks.append(time.perf_counter())
import nnterp
from nnterp_conformance import cli
marks.append(time.perf_counter())
from nnterp.registry import family_for
family_for("gpt2")
marks.append(time.perf_counter())
torch.set_num_threads(1)
from nnterp_conformance.runner import load, run
model = load("gpt2")
marks.append(time.perf_counter())
run(model)
marks.append(time.perf_counter())
others = sorted(name for name in sys.modules if name.startswith(("nnterp_text.families.", "nnterp_recurrent.families.", "nnterp_vision.families.", "nnterp_toy")))
names = ["import torch, transformers, nnsight", "import nnterp and the kit's command", "find gpt2's family", "build the model (nnsight's meta load, nnterp's envoys)", "run the 22 checks"]
print(json.dumps({"phases": dict(zip(names, [b - a for a, b in zip(marks, marks[1:])])), "families_imported": others}))
"""


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def measure(repeats: int) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """Medians of each command and of each phase of one check, interleaved over ``repeats`` rounds."""
    for command in COMMANDS.values():  # warm: the checkpoint written, the files in the page cache
        timed(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    phases: dict[str, list[float]] = {}
    imported: list[str] = []
    for _ in range(repeats):
        for name, command in COMMANDS.items():
            times[name].append(timed(command))
        found = json.loads(subprocess.run([sys.executable, "-c", PHASES], cwd=ROOT, check=True, capture_output=True, text=True).stdout)
        for name, seconds in found["phases"].items():
            phases.setdefault(name, []).append(seconds)
        imported = found["families_imported"]
    return ({name: statistics.median(values) for name, values in times.items()}, {name: statistics.median(values) for name, values in phases.items()}, imported)


def rows(repeats: int) -> list[str]:
    medians, phases, imported = measure(repeats)
    bare = next(iter(medians.values()))
    lines = [f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} at the end), median of {repeats}:", ""]
    lines += ["| process | seconds | ratio to the bare import |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {seconds:.2f} | {seconds / bare:.2f}x |" for name, seconds in medians.items()]
    lines += ["", "One `check gpt2` process, phase by phase:", "", "| phase | seconds |", "| --- | ---: |"]
    lines += [f"| {name} | {seconds:.2f} |" for name, seconds in phases.items()]
    lines += ["", f"Family modules imported by the whole check: {', '.join(imported) or 'none'}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--write", action="store_true", help="replace the start-up rows of benchmarks/README.md")
    arguments = parser.parse_args(argv)
    lines = rows(arguments.repeats)
    print("\n".join(lines))
    if arguments.write:
        text = README.read_text()
        if BEGIN not in text:
            raise SystemExit(f"{README} has no {BEGIN} ... {END} markers to write between")
        head, rest = text.split(BEGIN, 1)
        README.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + rest.split(END, 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
