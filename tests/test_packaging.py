"""Each member is its own wheel: nnterp-core alone installs, and names nnterp-text for a GPT-2 checkpoint."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOAD = (
    "import sys, nnterp\n"
    "from nnterp import StandardizedTransformer\n"
    "model = StandardizedTransformer(sys.argv[1])\n"
    "print('loaded', model.family.__name__, model.num_layers)\n"
)


def uv(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    executable = shutil.which("uv")
    assert executable, "uv is needed to build and install the members (pip install uv)"
    return subprocess.run([executable, *arguments], cwd=cwd, capture_output=True, text=True)


@pytest.mark.slow
def test_core_alone_installs_and_asks_for_nnterp_text(tmp_path):
    from nnterp_conformance import tiny_checkpoint

    checkpoint = tiny_checkpoint("gpt2")
    wheels = tmp_path / "wheels"
    built = uv("build", "--all-packages", "--wheel", "-q", "-o", str(wheels))
    assert built.returncode == 0, built.stderr
    assert {path.name.split("-")[0] for path in wheels.glob("*.whl")} >= {
        "nnterp_core",
        "nnterp_text",
        "nnterp_recurrent",
        "nnterp_vision",
        "nnterp_conformance",
    }
    constraints = tmp_path / "constraints.txt"
    exported = uv("export", "--frozen", "--no-hashes", "--no-emit-workspace", "--no-dev", "-q", "-o", str(constraints))
    assert exported.returncode == 0, exported.stderr
    venv = tmp_path / "venv"
    assert uv("venv", "-q", "-p", sys.executable, str(venv)).returncode == 0
    python = str(venv / "bin" / "python")

    def install(*packages: str) -> None:
        result = uv("pip", "install", "-q", "--python", python, "--find-links", str(wheels), "-c", str(constraints), *packages)
        assert result.returncode == 0, result.stderr

    install("nnterp-core")
    listed = subprocess.run([python, "-c", "import nnterp, importlib.util as u; print(u.find_spec('nnterp_text'))"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "None"
    alone = subprocess.run([python, "-c", LOAD, str(checkpoint)], capture_output=True, text=True)
    assert alone.returncode != 0
    assert "FamilyNotFound" in alone.stderr and "nnterp-text" in alone.stderr

    install("nnterp-text")
    together = subprocess.run([python, "-c", LOAD, str(checkpoint)], capture_output=True, text=True)
    assert together.returncode == 0, together.stderr
    assert together.stdout.split()[:2] == ["loaded", "nnterp_text.families.gpt2"]
