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


def assert_breaks(check: str, model: Any, broken: Any, message: str, case: Any = None) -> None:
    """``check`` passes on ``model`` and fails on ``broken`` (a variant of it) with ``message`` in its detail.

    How a family's tests show the kit catches the meaning the variant breaks::

        assert_breaks("vision_contribution", model, broken({CLIPAttention: WrongContribution}), "off by")
    """
    from .checks import verdict
    from .runner import PROMPTS

    case = PROMPTS if case is None else case
    passed = verdict(check, model, case)
    assert passed.status == "pass", str(passed)
    found = verdict(check, broken, case)
    assert found.status == "fail" and message in found.detail, str(found)
