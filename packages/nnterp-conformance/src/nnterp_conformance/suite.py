"""The kit as a test suite: every check on every selected checkpoint, first on fixed prompts, then on drawn cases.

A project collects it by subclassing, as pandas' extension tests are used (the
base is not collected on its own, so importing it runs nothing)::

    from nnterp_conformance.suite import BaseConformance

    @pytest.mark.nnterp_checkpoints("my_model")   # optional: these checkpoints only
    class TestMyFamily(BaseConformance):
        pass

The plugin's ``--nnterp-checkpoint``, ``--nnterp-family`` and ``--nnterp-shard``
narrow it further.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from .checks import CHECKS, verdict
from .runner import PROMPTS
from .strategies import cases


def declared_skip(checkpoint: str, check: str) -> str | None:
    """Why the family of a registered checkpoint says ``check`` skips there (a fragment of the reason); None where it does not.

    A checkpoint given by path belongs to no family's ``tiny``: its skips are not held to a declaration.
    """
    from nnterp.registry import checkpoint_family, family_named, is_checkpoint

    if not is_checkpoint(checkpoint):
        return None
    return family_named(checkpoint_family(checkpoint)).skips.get(checkpoint, {}).get(check)


class BaseConformance:
    """One test per (checkpoint, check): the check's verdict on fixed prompts, then on drawn cases.

    A registered checkpoint's skips are held to its family's ``skips``: each
    skip must be declared there (with a fragment of its reason), and a declared
    skip that passes fails, so the declaration moves with the model.
    """

    def test_generated_checks_are_those_that_apply(self, nnterp_model: Any, nnterp_checkpoint: str) -> None:
        """The pairs collected from the meta-built model are the loaded model's: no check that applies went ungenerated."""
        from .applicability import applicable

        generated = applicable(nnterp_checkpoint)
        loaded = tuple(name for name, found in CHECKS.items() if found.applies_to(nnterp_model))
        assert generated == loaded, (
            f"{nnterp_checkpoint}: the tests generated {sorted(set(generated) - set(loaded))} that do not apply and left out "
            f"{sorted(set(loaded) - set(generated))} that do: the meta-built model's structure differs from the loaded one's"
        )

    def test_check(
        self, nnterp_model: Any, nnterp_checkpoint: str, nnterp_check: str, nnterp_profile: settings
    ) -> None:
        assert CHECKS[nnterp_check].applies_to(nnterp_model), (
            f"{nnterp_check} was generated for {nnterp_checkpoint}, to which it does not apply (a {CHECKS[nnterp_check].kind} check)"
        )
        first = verdict(nnterp_check, nnterp_model, PROMPTS)
        declared = declared_skip(nnterp_checkpoint, nnterp_check)
        if first.status == "skip":
            assert declared is not None, (
                f"{nnterp_checkpoint}: {nnterp_check} skipped ({first.detail}), and its family declares no such skip: "
                "make the value available, or add the check to the family's skips for this checkpoint with why"
            )
            assert declared in first.detail, (
                f"{nnterp_checkpoint}: {nnterp_check} skipped for {first.detail!r}, its family says for {declared!r}"
            )
            pytest.skip(first.detail)
        assert first.status == "pass", f"{nnterp_checkpoint}: {first.detail}"
        assert declared is None, (
            f"{nnterp_checkpoint}: {nnterp_check} passes, yet its family declares it skips ({declared!r}): remove it from skips"
        )
        if not CHECKS[nnterp_check].drawn:
            return

        @nnterp_profile
        @given(case=cases())
        def drawn(case: Any) -> None:
            result = verdict(nnterp_check, nnterp_model, case)
            # a skip here is about the draw (a batch of one for the batching check)
            assert result.status != "fail", f"{nnterp_checkpoint}, {case}: {result.detail}"

        drawn()
