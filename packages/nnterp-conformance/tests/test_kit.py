"""The kit over every registered tiny checkpoint: one test per (checkpoint, check), grouped per checkpoint."""

from nnterp_conformance.suite import BaseConformance


class TestKit(BaseConformance):
    """Every check on every registered checkpoint (the plugin's options narrow it)."""
