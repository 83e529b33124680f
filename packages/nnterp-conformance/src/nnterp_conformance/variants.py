"""A family with some of its components swapped: how a test shows a check fails when a meaning is pointed wrong."""

from __future__ import annotations

import dataclasses
from typing import Any


def with_envoys(family: Any, envoys: dict[Any, type], name: str | None = None) -> Any:
    """A copy of ``family`` (its names, task, hooks) whose ``envoys`` map the keys of ``envoys`` to other components.

    Every other field is kept (``rename``, ``task``, ``project_on_vocab``,
    ``prepare_invoke`` ...), so the variant loads exactly as the family does
    except where ``envoys`` says; ``family`` is a ``Family`` or a family module::

        broken = with_envoys(llava.FAMILY, {CLIPAttention: WrongContribution})
        model = StandardizedTransformer(tiny_checkpoint("llava"), family=broken)
    """
    from nnterp.family import as_family

    family = as_family(family)
    variant = dataclasses.replace(
        family,
        name=name or f"broken_{family.name}",
        envoys={**envoys, **{key: value for key, value in family.envoys.items() if key not in envoys}},
    )
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
