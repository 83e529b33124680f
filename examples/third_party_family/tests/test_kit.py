"""The kit on the toy family: every check, on the toy's tiny checkpoint."""

import pytest
from nnterp_conformance.suite import BaseConformance


@pytest.mark.nnterp_checkpoints("nnterp_toy")
class TestToyConformance(BaseConformance):
    """Every kit check on the toy, nothing else: subclassing is all a family author writes."""
