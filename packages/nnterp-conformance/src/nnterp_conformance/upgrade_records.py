"""The upgrade radar's records, in either environment: the hidden ``records`` subcommand, and running it under another Python."""

from __future__ import annotations

import collections
import json
import os
import subprocess
from pathlib import Path
from typing import Any


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
    by_class = {
        model_type
        for model_type in model_types
        if model_type not in named and family_of_classes(list(mapped_classes(model_type)))
    }
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


def unrun(checkpoint: str, error: str) -> dict[str, Any]:
    """The record of a checkpoint the kit did not run on at all (the ``records`` command failed), with what it raised."""
    from nnterp.registry import checkpoint_family, family_module, family_named

    family = family_module(family_named(checkpoint_family(checkpoint)))
    return {"checkpoint": checkpoint, "family": family, "status": "fail", "checks": {}, "reason": f"raises {error}"}


def records_command(checkpoints: list[str] | None, out: Path, jobs: int = 1) -> int:
    """The hidden ``records`` subcommand: the raw records of this environment's release, as JSON into ``out``."""
    found = records(checkpoints, jobs=jobs)
    out.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {out}", flush=True)
    return 0
