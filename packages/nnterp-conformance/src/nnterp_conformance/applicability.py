"""Which checks apply to a checkpoint, known when tests are collected: the plugin generates only those pairs.

A check applies to a model that has what it is about (a mixture's checks to a
model with a ``Moe`` block, a vision check to one with a tower:
``Check.applies_to``). That is a fact of the model's structure, which
``StandardizedTransformer`` builds on the meta device; the weights load at
the first trace, which this never runs. The answer for a registered
checkpoint is kept in its directory under a digest of the kit's and the
families' code, so a warm run reads it back and any change to that code asks
again; ``test_generated_checks_are_those_that_apply`` holds the kept answer to
the loaded model's.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path

#: the import packages whose code decides a model's structure and a check's applicability
DECIDING = ("nnterp", "nnterp_text", "nnterp_recurrent", "nnterp_vision", "nnterp_conformance")


@cache
def code_digest() -> str:
    """A digest of every module of the installed nnterp packages (and of the checks plugins add)."""
    import importlib.util

    from .checks import CHECKS, load_plugins

    load_plugins()
    roots = {package: importlib.util.find_spec(package) for package in DECIDING}
    files = sorted(
        path
        for spec in roots.values()
        if spec is not None and spec.submodule_search_locations
        for location in spec.submodule_search_locations
        for path in Path(location).rglob("*.py")
    )
    digest = hashlib.sha256(" ".join(CHECKS).encode())
    for path in files:
        digest.update(path.read_bytes())
    # a check from a third party's plugin decides too: its module's code
    for found in CHECKS.values():
        module = importlib.util.find_spec(found.run.__module__)
        if module is not None and module.origin and not module.name.startswith(DECIDING):
            digest.update(Path(module.origin).read_bytes())
    return digest.hexdigest()[:12]


def applicable(checkpoint: str) -> tuple[str, ...]:
    """The names of the checks that apply to ``checkpoint`` (a registered name or a directory), in ``CHECKS`` order."""
    from .checkpoints import registered, tiny_checkpoint

    if not registered(checkpoint):
        return applicable_to(checkpoint)
    kept = tiny_checkpoint(checkpoint) / f".nnterp-applicable-{code_digest()}.json"
    if kept.exists():
        return tuple(json.loads(kept.read_text()))
    found = applicable_to(checkpoint)
    handle, scratch = tempfile.mkstemp(dir=kept.parent, prefix=".applicable-")
    with os.fdopen(handle, "w") as file:
        json.dump(list(found), file)
    os.replace(scratch, kept)  # atomic: a worker reading it never sees half a list
    return found


def applicable_to(checkpoint: str) -> tuple[str, ...]:
    """The checks that apply, asked of the model built on the meta device (no weight is loaded)."""
    from .checks import CHECKS, load_plugins
    from .runner import load

    load_plugins()
    model = load(checkpoint)
    return tuple(name for name, found in CHECKS.items() if found.applies_to(model))
