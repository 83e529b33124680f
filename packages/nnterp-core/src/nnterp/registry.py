"""Where families and their tiny checkpoints are found: entry points, keyed by model type.

A family package lists, under the ``nnterp.families`` group, one entry per
model type it serves, naming the family module; and under
``nnterp.checkpoints`` one entry per tiny checkpoint, naming a ``TinyConfig``.
A family written in a user's own package registers the same way and is found
exactly like ours.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

from ._served import SERVED_BY
from .errors import FamilyNotFound

FAMILIES = "nnterp.families"
CHECKPOINTS = "nnterp.checkpoints"


@lru_cache(maxsize=None)
def families() -> dict[str, EntryPoint]:
    """Every installed family entry point, by the model type it serves."""
    return {entry.name: entry for entry in entry_points(group=FAMILIES)}


@lru_cache(maxsize=None)
def checkpoints() -> dict[str, EntryPoint]:
    """Every installed tiny-checkpoint entry point, by checkpoint name."""
    return {entry.name: entry for entry in entry_points(group=CHECKPOINTS)}


def family_for(model_type: str) -> ModuleType:
    """The family module serving ``model_type``; a clear error naming what to install when none does."""
    entry = families().get(model_type)
    if entry is not None:
        return importlib.import_module(entry.value)
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
