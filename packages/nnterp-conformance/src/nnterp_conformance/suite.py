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


class BaseConformance:
    """One test per (checkpoint, check): the check's verdict on fixed prompts, then on drawn cases."""

    def test_check(self, nnterp_model: Any, nnterp_checkpoint: str, nnterp_check: str, nnterp_profile: settings) -> None:
        if not CHECKS[nnterp_check].applies_to(nnterp_model):
            pytest.skip(f"{nnterp_check} does not apply to {nnterp_checkpoint} (a {CHECKS[nnterp_check].kind} check)")
        first = verdict(nnterp_check, nnterp_model, PROMPTS)
        if first.status == "skip":
            pytest.skip(first.detail)
        assert first.status == "pass", f"{nnterp_checkpoint}: {first.detail}"

        @nnterp_profile
        @given(case=cases())
        def drawn(case: Any) -> None:
            result = verdict(nnterp_check, nnterp_model, case)
            # a skip here is about the draw (a batch of one for the batching check)
            assert result.status != "fail", f"{nnterp_checkpoint}, {case}: {result.detail}"

        drawn()
