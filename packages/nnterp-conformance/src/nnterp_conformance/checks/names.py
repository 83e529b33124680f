"""Names: every standard name is the very envoy of the native module it aliases."""

from __future__ import annotations

from typing import Any

from nnsight import Envoy
from nnterp.protocols import StandardModel

from .base import Case, CheckFailure, check


def _resolve(envoy: Any, path: str | type) -> Any:
    if isinstance(path, type):
        # a class key names the one direct child whose module is an instance of it (a hybrid's mixer)
        children = [child for child in envoy.__dict__.get("_children", ()) if isinstance(child._module, path)]
        return children[0] if len(children) == 1 else None
    for part in path.split("."):
        # "root" is nnsight's way to the model's root from any envoy (GIT's head is the root's own "output")
        envoy = envoy.root if part == "root" else envoy.__dict__.get(part)
        if envoy is None:
            return None
    return envoy


@check("names")
def standard_names_alias_native_envoys(model: StandardModel, case: Case) -> str:
    """Each alias in the family's rename is the same envoy as the native module, and every alias resolves somewhere."""
    rename = model.family.rename
    resolved: dict[str, int] = {alias: 0 for alias in rename.values()}
    for envoy in model.modules():
        for native, alias in rename.items():
            original = _resolve(envoy, native)
            if not isinstance(original, Envoy):
                continue
            standard = _resolve(envoy, alias)
            if standard is not original:
                raise CheckFailure(f"{envoy.path}: {alias!r} is not the envoy of {native!r}")
            resolved[alias] += 1
    missing = [alias for alias, count in resolved.items() if count == 0]
    if missing:
        raise CheckFailure(f"aliases that resolve nowhere (a module renamed in transformers?): {', '.join(missing)}")
    for name in model.family.root_names:
        if not isinstance(model.__dict__.get(name), Envoy):
            raise CheckFailure(f"the root has no {name!r}")
    return f"{sum(resolved.values())} aliases, each the native envoy"
