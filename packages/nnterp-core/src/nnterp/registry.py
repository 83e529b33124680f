"""Where families are found: two entry-point groups, read in order.

A package with many families names its ``Catalog`` (a generated index, plain
data) under ``nnterp.catalogs``; a third party's single family names its
``Family`` under ``nnterp.families``::

    [project.entry-points."nnterp.catalogs"]
    nnterp-text = "nnterp_text.catalog:CATALOG"

    [project.entry-points."nnterp.families"]
    nnterp_toy = "nnterp_toy.families.toy:FAMILY"

Finding a family reads the catalogs first, which imports no family; only a
name no catalog holds loads the single families (importing each one's
package), so loading a checkpoint imports its own family and nothing else.
A name both kinds hold resolves to the catalog's; pass ``family=`` to
``StandardizedTransformer`` to choose another. A family written in a user's
own package is found exactly like ours; its tiny checkpoints come with it
(``Family.tiny``).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from . import reach
from ._served import SERVED_BY
from .errors import FamilyNotFound
from .family import Family, family_of_module

CATALOGS = "nnterp.catalogs"
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
        """The catalog of ``families``, each defined in ``modules[family.name]``.

        A family's classes are those it declares and those transformers' auto
        mappings give its model types (``own_classes``); a class two families
        claim goes to the first.
        """
        classes: dict[str, str] = {}
        for family in families:
            owned = [
                *family.model_classes,
                *(name for model_type in family.model_types for name in own_classes(model_type)),
            ]
            for name in owned:
                classes.setdefault(name, family.name)
        return cls(
            modules={family.name: modules[family.name] for family in families},
            model_types={model_type: family.name for family in families for model_type in family.model_types},
            model_classes=classes,
            checkpoints={
                name: (family.name, tiny.model_type) for family in families for name, tiny in family.tiny.items()
            },
        )


#: transformers' auto mappings whose classes a family serves: the causal LM, the base model, the vision-language wrapper
AUTO_MAPPINGS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
)


def mapped_classes(model_type: str) -> tuple[str, ...]:
    """The class names transformers' auto mappings build ``model_type`` with (``exaone``: ``LlamaForCausalLM``, ...)."""
    from transformers.models.auto import modeling_auto

    found: list[str] = []
    for mapping in AUTO_MAPPINGS:
        names = getattr(modeling_auto, mapping).get(model_type, ())
        found += [names] if isinstance(names, str) else list(names)
    return tuple(dict.fromkeys(found))


def own_classes(model_type: str) -> tuple[str, ...]:
    """The classes of ``mapped_classes`` that ``model_type``'s own modeling module defines.

    A config-only type (transformers' ``exaone`` builds ``LlamaForCausalLM``)
    owns none: its classes stay Llama's, so the family serving ``llama`` is the
    one that serves them.
    """
    import importlib.util

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    try:
        spec = importlib.util.find_spec(f"transformers.models.{module}.modeling_{module}")
    except ModuleNotFoundError:
        return ()
    if spec is None or not spec.origin:
        return ()
    with open(spec.origin, encoding="utf-8") as source:
        text = source.read()
    return tuple(name for name in mapped_classes(model_type) if f"\nclass {name}(" in text)


def _merged(catalogs: list[Catalog], over: Catalog | None = None) -> Catalog:
    """One index of ``catalogs``, the earlier winning a name two hold; ``over``'s names win over all of them."""
    merged: dict[str, dict] = {field.name: {} for field in dataclasses.fields(Catalog)}
    for index in reversed([*([over] if over else []), *catalogs]):
        for name, table in merged.items():
            table.update(getattr(index, name))
    return Catalog(**merged)


def _loaded(group: str) -> list[Catalog]:
    """Each entry of ``group`` as a Catalog (an entry naming one ``Family`` is indexed on its own)."""
    found = []
    for entry in entry_points(group=group):
        loaded = entry.load()
        if isinstance(loaded, Family):
            loaded = Catalog.of([loaded], {loaded.name: entry.module})
        if not isinstance(loaded, Catalog):
            raise TypeError(
                f"the {group!r} entry point {entry.name!r} names {entry.value!r}, which is neither an nnterp Family "
                "nor a Catalog; name the module's FAMILY (pkg.families.mine:FAMILY) or its CATALOG"
            )
        found.append(loaded)
    return found


@cache
def indexed() -> Catalog:
    """The families every installed ``nnterp.catalogs`` index names: plain data, no family imported."""
    return _merged(_loaded(CATALOGS))


@cache
def catalog() -> Catalog:
    """Every installed family in one index: the catalogs', then each single ``nnterp.families`` entry (which this imports)."""
    return _merged(_loaded(FAMILIES), over=indexed())


def _entry(table: str, key: str) -> Any:
    """``key`` in the catalogs' ``table``, or failing that in the single families' (None where neither holds it)."""
    found = getattr(indexed(), table).get(key)
    return found if found is not None else getattr(catalog(), table).get(key)


def families() -> dict[str, str]:
    """The module defining the family of every installed model type, by model type (imports only the single families)."""
    index = catalog()
    return {model_type: index.modules[name] for model_type, name in index.model_types.items()}


@cache
def family_named(name: str) -> Family:
    """The installed family called ``name``."""
    module = _entry("modules", name)
    if module is None:
        raise FamilyNotFound(
            f"no installed family is called {name!r}; installed: {', '.join(sorted(catalog().modules))}"
        )
    family = family_of_module(importlib.import_module(module))
    if family.name != name:
        raise TypeError(
            f"{module} defines the family {family.name!r}, and its catalog calls it {name!r}: regenerate the catalog (scripts/catalogs.py)"
        )
    return family


def family_for(model_type: str) -> Family:
    """The family serving ``model_type``; a clear error naming what to install, or why it is out of reach, when none does."""
    name = _entry("model_types", model_type)
    if name is not None:
        return family_named(name)
    missing_package(model_type)
    reach.refuse(model_type)
    raise FamilyNotFound(
        f"no nnterp family exists yet for model type {model_type!r}; write one "
        f"(docs/adding-a-family.md) and register it under the {FAMILIES!r} entry-point group, "
        "or pass family= (an nnterp Family) to StandardizedTransformer"
    )


def missing_package(model_type: str) -> None:
    """Raise ``FamilyNotFound`` naming the package to install where an uninstalled nnterp package serves ``model_type``."""
    package = next((name for name, types in SERVED_BY.items() if model_type in types), None)
    if package is not None:
        raise FamilyNotFound(
            f"model type {model_type!r} is served by the {package} package, which is not installed; "
            f"install it (uv add {package}, or pip install {package}) and load again"
        )


def family_of_classes(classes: list[str]) -> tuple[Family, str] | None:
    """The family serving the first of ``classes`` any family serves, with that class's name; None where none does."""
    for name in classes:
        found = _entry("model_classes", name)
        if found is not None:
            return family_named(found), name
    return None


def checkpoint_names() -> list[str]:
    """Every installed tiny checkpoint's name, sorted (imports only the single families)."""
    return sorted(catalog().checkpoints)


def is_checkpoint(name: str) -> bool:
    """Whether ``name`` is a registered tiny checkpoint (a catalog's name imports nothing)."""
    return _entry("checkpoints", name) is not None


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
    entry = _entry("checkpoints", name)
    if entry is None:
        known = ", ".join(checkpoint_names()) or "(none: is a family package installed?)"
        raise LookupError(f"no tiny checkpoint is registered as {name!r}; registered: {known}")
    return entry


def family_module(family: Family) -> str:
    """Where ``family`` is defined, as reports name it (``nnterp_text.families.bert``); its name where no catalog holds it."""
    return _entry("modules", family.name) or family.name
