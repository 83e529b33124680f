"""The kit over every registered tiny checkpoint: one test per (checkpoint, check), grouped per checkpoint."""

from nnterp_conformance.suite import TestConformance  # noqa: F401 - collected here
