"""The README's two commands are all a newcomer runs: `uv sync` (which `uv run` does first) compiles the bytecode itself.

Where `PYTHONDONTWRITEBYTECODE` is set, as on the project's machines, nothing writes a `.pyc` at import, so a sync
that did not compile would leave every process compiling torch and transformers from source (the fresh-clone suite
took 71 minutes that way). The workspace's `[tool.uv] compile-bytecode = true` is what makes the sync compile.
"""

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_workspace_asks_uv_to_compile():
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]
    assert settings.get("compile-bytecode") is True


@pytest.mark.slow
def test_a_plain_sync_leaves_torch_compiled(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: `pip install uv`")
    environment = tmp_path / "venv"
    # a fresh environment of the locked workspace, as a fresh clone's first `uv run` makes it: no flag but the lock's
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(environment), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("UV_COMPILE_BYTECODE", None)
    done = subprocess.run(
        [uv, "sync", "--locked", "--no-default-groups", "--package", "nnterp-core"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    torch_dirs = list(environment.glob("lib/python*/site-packages/torch"))
    assert torch_dirs, f"the sync installed no torch into {environment}"
    compiled = list(torch_dirs[0].glob("__pycache__/*.pyc"))
    assert compiled, f"a plain `uv sync` left torch without bytecode (stderr: {done.stderr[-500:]})"
    assert any(path.name.startswith("__init__.") for path in compiled)
