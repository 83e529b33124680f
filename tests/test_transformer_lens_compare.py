"""The TransformerLens table holds against TransformerLens 4.3 itself: scripts/transformer_lens_compare.py, in an environment of its own.

TransformerLens is in the root's ``bench`` group, never in the shared
environment: the test builds (or reuses) one outside it with
``uv sync --locked --group bench`` (from uv's cache first, offline; else from
the index) and runs the comparison there as a subprocess. Set
``NNTERP_TRANSFORMER_LENS_VENV`` to choose where that environment lives.
Where it cannot be built (no uv, no network and nothing cached) the test is
skipped, saying how to build it.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("NNTERP_TRANSFORMER_LENS_VENV", Path.home() / ".cache" / "nnterp" / "transformer-lens-venv"))
SYNC = ["uv", "sync", "--locked", "--group", "bench", "--quiet"]


def _environment() -> dict[str, str]:
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(VENV)}
    env.pop("VIRTUAL_ENV", None)
    return env


def _build() -> str | None:
    """Sync the environment; None when done, else why it could not be."""
    if shutil.which("uv") is None:
        return "uv is not on PATH"
    errors = []
    for extra in (["--offline"], []):
        result = subprocess.run(SYNC + extra, cwd=ROOT, env=_environment(), capture_output=True, text=True, timeout=600)
        if result.returncode == 0:
            return None
        errors.append(result.stderr.strip()[-500:])
    return "; ".join(errors)


def test_every_row_holds_against_transformer_lens():
    failed = _build()
    if failed is not None:
        pytest.skip(
            f"no TransformerLens environment at {VENV} ({failed}); build it with "
            f"UV_PROJECT_ENVIRONMENT={VENV} uv sync --locked --group bench"
        )
    result = subprocess.run(
        ["uv", "run", "--no-sync", "python", str(ROOT / "scripts" / "transformer_lens_compare.py")],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    wrong = [line for line in result.stdout.splitlines() if " WRONG " in line]
    assert result.returncode == 0 and not wrong, "\n".join(wrong) + result.stdout[-3000:] + result.stderr[-3000:]
    assert "'ok'" in result.stdout.splitlines()[-1], result.stdout[-2000:]
