"""What every generator in scripts/ does with the file it renders: write it, or with ``--check`` say it is stale."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(target: Path, text: str, script: str) -> int:
    """Write ``text`` to ``target``; under ``--check``, exit status 1 (and say so) when ``target`` differs instead."""
    name = target.relative_to(ROOT)
    if "--check" in sys.argv:
        if target.read_text() != text:
            print(f"{name} is stale: run uv run python scripts/{script}")
            return 1
        return 0
    target.write_text(text)
    print(f"wrote {name}")
    return 0
