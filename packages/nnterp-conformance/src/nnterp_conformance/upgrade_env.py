"""The upgrade radar's scratch environment: this one's distributions, transformers moved to a release, and what differs.

``build`` makes it with uv (the nnterp distributions editable where they are
editable here, every other distribution held at this environment's version);
``packages`` says which distributions it adds, lacks or moves against this one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from .upgrade_findings import canonical, package_moves, pinned

#: the distribution the radar moves; every other one is held where this environment has it
MOVED = "transformers"


def nnterp_distributions() -> list[tuple[str, str, Path | None]]:
    """Each nnterp distribution installed here: its name, its version, and its source directory where it is installed editable."""
    found = {}
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"]
        if not name or not canonical(name).startswith("nnterp"):
            continue
        source = None
        text = distribution.read_text("direct_url.json")
        if text:
            direct = json.loads(text)
            if direct.get("dir_info", {}).get("editable") and direct.get("url", "").startswith("file://"):
                source = Path(unquote(urlparse(direct["url"]).path))
        found[canonical(name)] = (name, distribution.version, source)
    return sorted(found.values())


def uv() -> str:
    """The uv binary: the one running us (``uv run`` sets ``$UV``), else the one on the path."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        raise OSError("the upgrade radar builds its environment with uv, which is not on the PATH")
    return found


def freeze(python: str = sys.executable) -> str:
    """``uv pip freeze``'s output for the environment of ``python``."""
    return subprocess.run(
        [uv(), "pip", "freeze", "--python", python], capture_output=True, text=True, check=True
    ).stdout


def constraints(python: str = sys.executable) -> str:
    """This environment's distributions as constraints (``uv pip freeze``), less transformers and the nnterp distributions."""
    frozen = freeze(python)
    kept = []
    for line in frozen.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e ", "--")):
            continue
        name = canonical(re.split(r"[=<>~!@ \[;]", line, maxsplit=1)[0])
        if name == MOVED or name.startswith("nnterp"):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def install_arguments(release: str, scratch: Path) -> list[str]:
    """``uv pip install``'s arguments into ``scratch``: the constraints and the override files, then the nnterp distributions."""
    (scratch / "constraints.txt").write_text(constraints())
    (scratch / "overrides.txt").write_text(f"{MOVED}=={release}\n")
    arguments = ["-c", str(scratch / "constraints.txt"), "--override", str(scratch / "overrides.txt")]
    for name, version, source in nnterp_distributions():
        arguments += ["-e", str(source)] if source is not None else [f"{name}=={version}"]
    return arguments


def scratch_python(scratch: Path) -> Path:
    return scratch / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def build(release: str, scratch: Path, say: Callable[[str], None] = print) -> str | None:
    """Make ``scratch`` a virtual environment with ``transformers==release``; None, or uv's message where it could not be built.

    An existing environment there is reused: the install then only moves what differs.
    """
    python = scratch_python(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        say(f"creating {scratch} (python {sys.executable})")
        made = subprocess.run(
            [uv(), "venv", "-q", str(scratch), "--python", sys.executable], capture_output=True, text=True
        )
        if made.returncode:
            return made.stderr.strip() or made.stdout.strip()
    arguments = install_arguments(release, scratch)
    say(
        f"installing {MOVED}=={release} and the nnterp distributions into {scratch}, everything else held at this environment's versions"
    )
    installed = subprocess.run(
        [uv(), "pip", "install", "-q", "--python", str(python), *arguments], capture_output=True, text=True
    )
    if installed.returncode:
        return installed.stderr.strip() or installed.stdout.strip()
    found = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({MOVED!r}))"],
        capture_output=True,
        text=True,
    )
    if found.returncode or found.stdout.strip() != release:
        return f"the scratch environment has {MOVED} {found.stdout.strip() or found.stderr.strip()!r}, not {release}"
    return None


def packages(scratch: Path) -> list[tuple[str, str | None, str | None]] | None:
    """The distributions the scratch environment adds, lacks or has at another version than this one; None where a freeze failed.

    What it lacks is counted only among what the nnterp distributions require here (``required``): the
    scratch environment never had this one's development tools, and their absence is no move of the release's.
    """
    try:
        here, there = pinned(freeze()), pinned(freeze(str(scratch_python(scratch))))
    except (subprocess.CalledProcessError, OSError):
        return None
    needed = required([name for name, _, _ in nnterp_distributions()])
    return package_moves({name: version for name, version in here.items() if name in needed or name in there}, there)


def required(roots: list[str]) -> set[str]:
    """The canonical names of ``roots`` and every distribution they require in this environment, transitively (no extras
    but those a requirement asks for), as ``uv pip install -e`` of the roots installs them."""
    from packaging.requirements import Requirement  # transformers requires packaging, so it is here

    found: set[str] = set()
    queue: list[tuple[str, frozenset[str]]] = [(canonical(root), frozenset()) for root in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while queue:
        name, extras = queue.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.add(name)
        for line in distribution.requires or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker is None or any(
                requirement.marker.evaluate(environment) for environment in environments
            ):
                queue.append((canonical(requirement.name), frozenset(requirement.extras)))
    return found
