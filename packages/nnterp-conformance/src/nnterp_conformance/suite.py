"""The kit as a test suite: every check on every selected checkpoint, first on fixed prompts, then on drawn cases.

Run it with ``pytest --pyargs nnterp_conformance.suite`` (narrowed by the
plugin's ``--nnterp-*`` options), or collect it into a project's own tests with
``from nnterp_conformance.suite import TestConformance``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from .checks import verdict
from .runner import PROMPTS
from .strategies import cases


class TestConformance:
    """One test per (checkpoint, check): the check's verdict on fixed prompts, then on drawn cases."""

    def test_check(self, nnterp_model: Any, nnterp_checkpoint: str, nnterp_check: str, nnterp_profile: settings) -> None:
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
