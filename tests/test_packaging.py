"""Each member is its own wheel: nnterp-core alone installs and names the package a checkpoint needs; each leaf
package installs with nnterp-core alone and loads its families."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOAD = (
    "import sys, nnterp\n"
    "from nnterp import StandardizedTransformer\n"
    "from nnterp.registry import family_module\n"
    "model = StandardizedTransformer(sys.argv[1])\n"
    "print('loaded', family_module(model.family), model.num_layers)\n"
)
#: what a leaf package is proven on when installed alone: a checkpoint of one of its families, and that family's module
LEAVES = {
    "nnterp-text": ("gpt2", "nnterp_text.families.gpt2"),
    "nnterp-recurrent": ("mamba", "nnterp_recurrent.families.mamba"),
    "nnterp-vision": ("llava", "nnterp_vision.families.llava"),
}
INSTALLED = "import importlib.util as u; print(sorted(m for m in ('nnterp_text', 'nnterp_recurrent', 'nnterp_vision', 'nnterp_conformance') if u.find_spec(m)))"


def uv(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    executable = shutil.which("uv")
    assert executable, "uv is needed to build and install the members (pip install uv)"
    return subprocess.run([executable, *arguments], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """Every member built as a wheel, and the lock's third-party pins as constraints."""
    folder = tmp_path_factory.mktemp("wheels")
    built = uv("build", "--all-packages", "--wheel", "-q", "-o", str(folder))
    assert built.returncode == 0, built.stderr
    constraints = folder / "constraints.txt"
    exported = uv("export", "--frozen", "--no-hashes", "--no-emit-workspace", "--no-dev", "-q", "-o", str(constraints))
    assert exported.returncode == 0, exported.stderr
    return folder, constraints


@pytest.fixture
def venv(tmp_path, wheels):
    """A fresh virtual environment's python, and how to install members into it from the wheels."""
    folder, constraints = wheels
    assert uv("venv", "-q", "-p", sys.executable, str(tmp_path / "venv")).returncode == 0
    python = str(tmp_path / "venv" / "bin" / "python")

    def install(*packages: str) -> None:
        result = uv("pip", "install", "-q", "--python", python, "--find-links", str(folder), "-c", str(constraints), *packages)
        assert result.returncode == 0, result.stderr

    return python, install


def run(python: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, *arguments], capture_output=True, text=True)


def test_every_leaf_package_depends_on_core_and_no_other_member():
    for distribution in LEAVES:
        project = tomllib.loads((ROOT / "packages" / distribution / "pyproject.toml").read_text())["project"]
        members = [spec for spec in project["dependencies"] if spec.startswith("nnterp")]
        assert [spec.split("=")[0].split(">")[0].split("<")[0] for spec in members] == ["nnterp-core"], (distribution, members)


@pytest.mark.slow
@pytest.mark.xdist_group("packaging")
def test_core_alone_installs_and_asks_for_nnterp_text(wheels, venv):
    from nnterp_conformance import tiny_checkpoint

    folder, _ = wheels
    assert {path.name.split("-")[0] for path in folder.glob("*.whl")} >= {
        "nnterp_core",
        "nnterp_text",
        "nnterp_recurrent",
        "nnterp_vision",
        "nnterp_conformance",
    }
    checkpoint = tiny_checkpoint("gpt2")
    python, install = venv
    install("nnterp-core")
    assert run(python, "-c", INSTALLED).stdout.strip() == "[]"
    alone = run(python, "-c", LOAD, str(checkpoint))
    assert alone.returncode != 0
    assert "FamilyNotFound" in alone.stderr and "nnterp-text" in alone.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("packaging")
@pytest.mark.parametrize("distribution", sorted(LEAVES))
def test_a_leaf_package_alone_loads_its_family(venv, distribution):
    from nnterp_conformance import tiny_checkpoint

    name, module = LEAVES[distribution]
    checkpoint = tiny_checkpoint(name)
    python, install = venv
    install(distribution)
    assert run(python, "-c", INSTALLED).stdout.strip() == str([distribution.replace("-", "_")])
    loaded = run(python, "-c", LOAD, str(checkpoint))
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split()[:2] == ["loaded", module]
