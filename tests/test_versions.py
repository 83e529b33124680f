"""The releases nnterp accepts and the ones it is proven on agree, and the wheels' ranges do what the README says.

``nnterp._versions.PROVEN`` names the release series the families are proven on; uv.lock pins a release of each, and
each package's range starts in it. The wheels install beside a release in range without touching it, and refuse a
release out of range with the resolver's message instead of replacing it, when asked to keep it.

The wheel tests resolve against the package registry (``uv pip install --dry-run``: metadata only, torch is never
downloaded).
"""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

import nnterp._versions
from nnterp._versions import PROVEN, series, unproven

ROOT = Path(__file__).resolve().parent.parent
#: the workspace's published members (examples/third_party_family is an example, not one of ours)
MEMBERS = sorted(path.parent for path in (ROOT / "packages").glob("*/pyproject.toml"))
#: what nnterp-core accepts of transformers (the message a resolver prints names it)
RANGE = ">=5.25,<6"


def locked() -> dict[str, str]:
    """By distribution, the release uv.lock pins."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return {canonicalize_name(package["name"]): package["version"] for package in lock["package"] if "version" in package}


def declared() -> list[tuple[str, Requirement]]:
    """Every third-party requirement of the members: (member, requirement)."""
    found = []
    for member in MEMBERS:
        project = tomllib.loads((member / "pyproject.toml").read_text())["project"]
        extras = project.get("optional-dependencies", {}).values()
        for spec in [*project["dependencies"], *(spec for group in extras for spec in group)]:
            requirement = Requirement(spec)
            if not requirement.name.startswith("nnterp"):
                found.append((member.name, requirement))
    return found


def lower_bound(specifier: SpecifierSet) -> Version | None:
    bounds = [Version(spec.version) for spec in specifier if spec.operator in (">=", "==", "~=", "===")]
    return min(bounds) if bounds else None


def test_proven_series_is_the_one_uv_lock_pins():
    pins = locked()
    for distribution, proven in PROVEN.items():
        assert series(pins[distribution]) == proven, (distribution, pins[distribution], proven)


def test_every_declared_range_starts_in_the_proven_series_and_holds_the_lock():
    pins = locked()
    ranges = {}
    for member, requirement in declared():
        name = canonicalize_name(requirement.name)
        if requirement.specifier:
            assert requirement.specifier.contains(pins[name]), (member, str(requirement), pins[name])
        if name in PROVEN:
            ranges[name] = (member, requirement.specifier)
            lower = lower_bound(requirement.specifier)
            assert lower is not None, f"{member}: {requirement} has no lower bound"
            assert series(str(lower)) == PROVEN[name], (member, str(requirement), PROVEN[name])
            # an upper bound below the next major (transformers) or minor (nnsight 0.x) release
            assert any(spec.operator == "<" for spec in requirement.specifier), (member, str(requirement))
    assert set(ranges) == set(PROVEN), f"no member declares {set(PROVEN) - set(ranges)}"
    assert ranges["transformers"][1] == SpecifierSet(RANGE)


@pytest.mark.parametrize(
    "installed, reported",
    [
        ({"transformers": "5.26.0", "nnsight": "0.8.1"}, ["transformers 5.26.0 (proven: 5.25.x)"]),
        ({"transformers": "5.25.3", "nnsight": "0.8.7"}, []),
        ({"transformers": "6.0.0", "nnsight": "0.9.0"}, ["transformers 6.0.0 (proven: 5.25.x)", "nnsight 0.9.0 (proven: 0.8.x)"]),
        ({"transformers": "5.24.0", "nnsight": "0.8.1"}, ["transformers 5.24.0 (proven: 5.25.x)"]),
    ],
)
def test_unproven_names_each_release_outside_its_series(monkeypatch, installed, reported):
    monkeypatch.setattr(nnterp._versions, "version", installed.__getitem__)
    assert unproven() == reported


def test_nothing_is_unproven_on_the_locked_environment():
    from importlib.metadata import version

    pins = locked()
    assert {name: version(name) for name in PROVEN} == {name: pins[name] for name in PROVEN}, "run `uv sync --inexact`"
    assert unproven() == []


# -- the wheels, installed beside a release a user already has


def uv(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    executable = shutil.which("uv")
    assert executable, "uv is needed to build and install the members (pip install uv)"
    return subprocess.run([executable, *arguments], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> list[str]:
    """The published members, each built as a wheel."""
    folder = tmp_path_factory.mktemp("wheels")
    built = uv("build", "--all-packages", "--wheel", "-q", "-o", str(folder), cwd=ROOT)
    assert built.returncode == 0, built.stderr
    names = {member.name.replace("-", "_") for member in MEMBERS}
    found = sorted(str(path) for path in folder.glob("*.whl") if path.name.split("-")[0] in names)
    assert len(found) == len(MEMBERS), found
    return found


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """A fresh virtual environment holding one release of transformers (alone: ``--no-deps``), by release."""
    made = {}

    def make(release: str) -> Path:
        if release not in made:
            folder = tmp_path_factory.mktemp(f"transformers-{release}")
            assert uv("venv", "-q", "--python", sys.executable, str(folder / "venv"), cwd=folder).returncode == 0
            python = folder / "venv" / "bin" / "python"
            result = uv("pip", "install", "-q", "--python", str(python), "--no-deps", f"transformers=={release}", cwd=folder)
            assert result.returncode == 0, result.stderr
            made[release] = python
        return made[release]

    return make


def dry_run(python: Path, *arguments: str) -> subprocess.CompletedProcess:
    """What ``uv pip install`` would do in that environment: it resolves (metadata only) and installs nothing."""
    return uv("pip", "install", "--dry-run", "--python", str(python), *arguments, cwd=python.parent.parent.parent)


def changes(result: subprocess.CompletedProcess, distribution: str) -> list[str]:
    """The lines of a dry run that remove (``-``) or add (``+``) a release of ``distribution``."""
    return re.findall(rf"^\s*([-+] {distribution}==\S+)", result.stderr + result.stdout, flags=re.M)


@pytest.mark.slow
@pytest.mark.xdist_group("wheels")
def test_wheels_install_beside_an_installed_release_in_range(wheels, environment):
    result = dry_run(environment("5.25.0"), *wheels)
    assert result.returncode == 0, result.stderr
    assert "Would install" in result.stderr, result.stderr
    assert changes(result, "transformers") == [], result.stderr
    assert "+ nnterp-core @ file://" in result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("wheels")
@pytest.mark.parametrize("keep", ["requirement", "constraint"])
@pytest.mark.parametrize("release", ["5.24.0", "4.57.6"])
def test_wheels_refuse_to_keep_a_release_out_of_range_and_say_why(wheels, environment, tmp_path, release, keep):
    """Asked to keep the installed release (on the command line or in a constraints file), the resolver says which
    requirement excludes it; nothing is replaced silently."""
    if keep == "requirement":
        arguments = [f"transformers=={release}"]
    else:
        constraints = tmp_path / "constraints.txt"
        constraints.write_text(f"transformers=={release}\n")
        arguments = ["-c", str(constraints)]
    result = dry_run(environment(release), *wheels, *arguments)
    assert result.returncode != 0, result.stderr
    assert "No solution found" in result.stderr, result.stderr
    assert f"nnterp-core==0.1.0 depends on transformers{RANGE}" in result.stderr, result.stderr
    assert f"transformers=={release}" in result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("wheels")
def test_a_plain_install_upgrades_a_release_out_of_range(wheels, environment):
    """What the README says a plain install does beside transformers 5.24: it replaces it by the newest release in
    range (which may be one the families were not proven on: the load proves the family then)."""
    result = dry_run(environment("5.24.0"), *wheels)
    assert result.returncode == 0, result.stderr
    removed, added = changes(result, "transformers")
    assert removed == "- transformers==5.24.0", result.stderr
    assert SpecifierSet(RANGE).contains(added.split("==")[1]), added
