"""What the scripts that build side environments (``ndif_stack.py``, ``vllm_env.py``) share: uv, and an interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def uv(script: str) -> str:
    """uv's path; ``script`` exits naming the fix where it is not on PATH."""
    found = shutil.which("uv")
    if found is None:
        sys.exit(f"{script}: uv is not on PATH (pip install uv)")
    return found


def interpreter(minor: int, why: str, script: str) -> str:
    """A Python 3.``minor``: ``NNTERP_PYTHON3{minor}``, this one, pyenv's, or ``python3.{minor}`` on PATH; ``why`` it must be."""
    name = f"python3.{minor}"
    candidates = [
        os.environ.get(f"NNTERP_PYTHON3{minor}", ""),
        sys.executable,
        *sorted(map(str, Path.home().glob(f".pyenv/versions/3.{minor}*/bin/{name}"))),
        shutil.which(name) or "",
    ]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", f"import sys; assert sys.version_info[:2] == (3, {minor})"], capture_output=True).returncode == 0:
            return candidate
    sys.exit(f"{script}: no Python 3.{minor} found ({why}); install one (pyenv install 3.{minor}) or set NNTERP_PYTHON3{minor} to its interpreter")
