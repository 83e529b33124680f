"""The releases the families are proven on, and whether this environment runs them.

``uv.lock`` pins the targeted releases and the kit proves every family there;
the packages accept a range (``transformers>=5.24,<6``) so that nnterp
co-installs with a newer release. On a release outside the proven series a
load proves its family on the checkpoint first (``StandardizedTransformer``'s
``verify``), since a release may move the operations a value is read at.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

#: by distribution, the release series (major.minor) the families were proven on: the one uv.lock pins
PROVEN = {"transformers": "5.25", "nnsight": "0.8"}


def series(release: str) -> str:
    """``"5.24.1"`` -> ``"5.24"``."""
    return ".".join(release.split(".")[:2])


def unproven() -> list[str]:
    """Each installed release of ``PROVEN``'s distributions outside its proven series, as ``"transformers 5.25.0 (proven: 5.24)"``."""
    found = []
    for distribution, proven in PROVEN.items():
        try:
            installed = version(distribution)
        except PackageNotFoundError:  # pragma: no cover - a dependency of nnterp-core
            continue
        if series(installed) != proven:
            found.append(f"{distribution} {installed} (proven: {proven}.x)")
    return found
