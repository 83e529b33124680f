"""A family with some of its components swapped: how a test shows a check fails when a meaning is pointed wrong."""

from __future__ import annotations

import types
from typing import Any


def with_envoys(family: types.ModuleType, envoys: dict[Any, type], name: str | None = None) -> types.ModuleType:
    """A copy of ``family`` (its names, task, hooks) whose ``ENVOYS`` map the keys of ``envoys`` to other components.

    Every public attribute is kept (``RENAME``, ``TASK``, ``project_on_vocab``,
    ``prepare_invoke`` ...), so the variant loads exactly as the family does
    except where ``envoys`` says::

        broken = with_envoys(llava, {CLIPAttention: WrongContribution})
        model = StandardizedTransformer(tiny_checkpoint("llava"), family=broken)
    """
    variant = types.ModuleType(name or f"broken_{family.__name__.rsplit('.', 1)[-1]}")
    variant.__dict__.update({key: value for key, value in vars(family).items() if not key.startswith("_")})
    variant.ENVOYS = {**envoys, **{key: value for key, value in family.ENVOYS.items() if key not in envoys}}
    return variant
