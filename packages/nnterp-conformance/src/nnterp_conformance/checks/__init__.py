"""The identity checks, each a plain function ``check(model, prompts) -> detail`` usable in a notebook.

Importing this package registers every check in ``CHECKS``, in the order they run.
"""

from . import names, residual, attention, mlp, edits, batching, availability, generation  # noqa: F401 - registration
from .base import CHECKS, Check, CheckFailure, Skip, Verdict, check, verdict

__all__ = ["CHECKS", "Check", "CheckFailure", "Skip", "Verdict", "check", "verdict"]
