"""Where families and their tiny checkpoints are found: entry points, keyed by model type.

A family package lists, under the ``nnterp.families`` group, one entry per
model type it serves, naming the family module (``gpt2 = "pkg.families.gpt2"``),
or one entry naming a table of them (``pkg = "pkg.families:SERVED"``, a dict
from model type to module path); and under ``nnterp.checkpoints`` one entry per
tiny checkpoint naming a ``TinyConfig``, or one naming a dict of them. A family
written in a user's own package registers the same way and is found exactly
like ours.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from ._served import SERVED_BY
from .errors import FamilyNotFound

FAMILIES = "nnterp.families"
CHECKPOINTS = "nnterp.checkpoints"


@lru_cache(maxsize=None)
def families() -> dict[str, str]:
    """The module path of every installed family, by the model type it serves."""
    found: dict[str, str] = {}
    for entry in entry_points(group=FAMILIES):
        if entry.attr:
            found.update(entry.load())
        else:
            found[entry.name] = entry.value
    return found


@lru_cache(maxsize=None)
def checkpoints() -> dict[str, Any]:
    """Every installed tiny checkpoint's ``TinyConfig``, by checkpoint name.

    Loading an entry imports the module it names, so keep checkpoint tables in
    light modules (``TinyConfig`` only, no ``transformers.models`` import).
    """
    found: dict[str, Any] = {}
    for entry in entry_points(group=CHECKPOINTS):
        loaded = entry.load()
        if isinstance(loaded, dict):
            found.update(loaded)
        else:
            found[entry.name] = loaded
    return found


def family_for(model_type: str) -> ModuleType:
    """The family module serving ``model_type``; a clear error naming what to install when none does."""
    path = families().get(model_type)
    if path is not None:
        return importlib.import_module(path)
    package = next((name for name, types in SERVED_BY.items() if model_type in types), None)
    if package is not None:
        raise FamilyNotFound(
            f"model type {model_type!r} is served by the {package} package, which is not installed; "
            f"install it (uv add {package}, or pip install {package}) and load again"
        )
    raise FamilyNotFound(
        f"no nnterp family exists yet for model type {model_type!r}; write one "
        f"(docs/adding-a-family.md) and register it under the {FAMILIES!r} entry-point group, "
        "or pass family= (a family module) to StandardizedTransformer"
    )


def family_name(module: ModuleType) -> str:
    """A family module's short name: ``gpt2`` for ``nnterp_text.families.gpt2``."""
    return module.__name__.rsplit(".", 1)[-1]
