"""Where families are found: one ``nnterp.families`` entry point per package.

A package's entry names either its ``Catalog`` (a generated index of its
families, so that finding one imports that family alone) or one ``Family``
(a third party's single family)::

    [project.entry-points."nnterp.families"]
    nnterp-text = "nnterp_text.catalog:CATALOG"
    nnterp_toy = "nnterp_toy.families.toy:FAMILY"

A family written in a user's own package registers the same way and is found
exactly like ours; its tiny checkpoints come with it (``Family.tiny``).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

from ._served import SERVED_BY
from .errors import FamilyNotFound
from .family import Family, family_of_module

FAMILIES = "nnterp.families"


@dataclasses.dataclass(frozen=True)
class Catalog:
    """A package's families, indexed so that nothing is imported until one is asked for.

    Generated from the families themselves by ``scripts/catalogs.py`` (a test
    checks it is current); never written by hand.
    """

    #: family name -> the module defining its ``FAMILY``
    modules: Mapping[str, str]
    #: model type -> family name
    model_types: Mapping[str, str]
    #: transformers model class name -> family name
    model_classes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: tiny checkpoint name -> (family name, the checkpoint's model type)
    checkpoints: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, families: list[Family], modules: Mapping[str, str]) -> Catalog:
        """The catalog of ``families``, each defined in ``modules[family.name]``."""
        return cls(
            modules={family.name: modules[family.name] for family in families},
            model_types={model_type: family.name for family in families for model_type in family.model_types},
            model_classes={name: family.name for family in families for name in family.model_classes},
            checkpoints={name: (family.name, tiny.model_type) for family in families for name, tiny in family.tiny.items()},
        )


@lru_cache(maxsize=None)
def catalog() -> Catalog:
    """Every installed package's families in one index (an entry naming a single ``Family`` loads it here)."""
    merged: dict[str, dict] = {field.name: {} for field in dataclasses.fields(Catalog)}
    for entry in entry_points(group=FAMILIES):
        loaded = entry.load()
        if isinstance(loaded, Family):
            loaded = Catalog.of([loaded], {loaded.name: entry.module})
        if not isinstance(loaded, Catalog):
            raise TypeError(
                f"the {FAMILIES!r} entry point {entry.name!r} names {entry.value!r}, which is neither an nnterp Family "
                "nor a Catalog; name the module's FAMILY (pkg.families.mine:FAMILY)"
            )
        for name, table in merged.items():
            table.update(getattr(loaded, name))
    return Catalog(**merged)


def families() -> dict[str, str]:
    """The module defining the family of every installed model type, by model type (nothing is imported)."""
    index = catalog()
    return {model_type: index.modules[name] for model_type, name in index.model_types.items()}


@lru_cache(maxsize=None)
def family_named(name: str) -> Family:
    """The installed family called ``name``."""
    module = catalog().modules.get(name)
    if module is None:
        raise FamilyNotFound(f"no installed family is called {name!r}; installed: {', '.join(sorted(catalog().modules))}")
    family = family_of_module(importlib.import_module(module))
    if family.name != name:
        raise TypeError(f"{module} defines the family {family.name!r}, and its catalog calls it {name!r}: regenerate the catalog (scripts/catalogs.py)")
    return family


def family_for(model_type: str) -> Family:
    """The family serving ``model_type``; a clear error naming what to install when none does."""
    name = catalog().model_types.get(model_type)
    if name is not None:
        return family_named(name)
    package = next((name for name, types in SERVED_BY.items() if model_type in types), None)
    if package is not None:
        raise FamilyNotFound(
            f"model type {model_type!r} is served by the {package} package, which is not installed; "
            f"install it (uv add {package}, or pip install {package}) and load again"
        )
    raise FamilyNotFound(
        f"no nnterp family exists yet for model type {model_type!r}; write one "
        f"(docs/adding-a-family.md) and register it under the {FAMILIES!r} entry-point group, "
        "or pass family= (an nnterp Family) to StandardizedTransformer"
    )


def checkpoint_names() -> list[str]:
    """Every installed tiny checkpoint's name, sorted (nothing is imported)."""
    return sorted(catalog().checkpoints)


def checkpoint_family(name: str) -> str:
    """The name of the family a registered tiny checkpoint belongs to (nothing is imported)."""
    return _checkpoint_entry(name)[0]


def checkpoint(name: str) -> Any:
    """The ``TinyConfig`` registered as ``name``: its family's, which this imports."""
    return family_named(_checkpoint_entry(name)[0]).tiny[name]


def checkpoint_model_type(name: str) -> str:
    """The model type of a registered tiny checkpoint (nothing is imported)."""
    return _checkpoint_entry(name)[1]


def checkpoints() -> dict[str, Any]:
    """Every installed tiny checkpoint's ``TinyConfig``, by name: this imports every family."""
    return {name: checkpoint(name) for name in checkpoint_names()}


def _checkpoint_entry(name: str) -> tuple[str, str]:
    entry = catalog().checkpoints.get(name)
    if entry is None:
        known = ", ".join(checkpoint_names()) or "(none: is a family package installed?)"
        raise LookupError(f"no tiny checkpoint is registered as {name!r}; registered: {known}")
    return entry


def family_module(family: Family) -> str:
    """Where ``family`` is defined, as reports name it (``nnterp_text.families.bert``); its name where no catalog holds it."""
    return catalog().modules.get(family.name, family.name)
