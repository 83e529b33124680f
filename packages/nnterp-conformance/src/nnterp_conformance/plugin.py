"""The pytest plugin (entry point ``pytest11``): tiny models as session fixtures."""

from __future__ import annotations

from typing import Any, Callable

import pytest


@pytest.fixture(scope="session")
def tiny_model() -> Callable[..., Any]:
    """Load a registered tiny checkpoint by name, once per session and set of load arguments.

    ``tiny_model("gpt2")`` is the checkpoint as registered (eager attention);
    ``tiny_model("llama", attn_implementation="sdpa")`` another load of it.
    """
    from .runner import load

    loaded: dict[tuple, Any] = {}

    def get(name: str, **kwargs: Any) -> Any:
        key = (name, tuple(sorted(kwargs.items())))
        if key not in loaded:
            loaded[key] = load(name, **kwargs)
        return loaded[key]

    return get
