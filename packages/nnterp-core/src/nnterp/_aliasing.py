"""nnsight's alias spellings, computed once per path while a model is built.

nnsight chooses each module's envoy class by matching every spelling of its
path under the ``rename`` aliases against the ``envoys`` keys, and
``aliasing.spellings`` recomputes the spellings of every ancestor for every
module: about half the time of building a GPT-2-small-sized model with a
family's maps (benchmarks/README.md). The spellings are a pure function of
the rename map, the path and (for a class key) the module's type, so for the
length of one construction they are kept. Outside a construction nnsight's
own function runs, untouched.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from nnsight.intervention import aliasing

_ORIGINAL = aliasing.spellings


@contextmanager
def spellings_kept() -> Iterator[None]:
    """Within it, ``aliasing.spellings`` answers each (rename, path, module type) once."""
    if aliasing.spellings is not _ORIGINAL:  # an outer construction keeps them already
        yield
        return
    kept: dict[tuple, list[str]] = {}

    def spellings(rename: dict | None, path: str, module: Any = None) -> list[str]:
        typed = any(isinstance(key, type) for key in (rename or {}))
        key = (id(rename), path, type(module) if typed else None)
        found = kept.get(key)
        if found is None:
            found = kept[key] = _ORIGINAL(rename, path, module)
        return list(found)

    aliasing.spellings = spellings
    try:
        yield
    finally:
        aliasing.spellings = _ORIGINAL
