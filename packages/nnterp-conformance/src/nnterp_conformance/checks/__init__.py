"""The identity checks, each a plain function ``check(model, case) -> detail`` usable in a notebook.

``verdict("contribution", model, ["Hello world"])`` runs one on plain prompts;
a ``Case`` also picks the block, head and edit a check exercises.

Importing this package registers every check in ``CHECKS``, in the order they run.
"""

from . import names, residual, streams, attention, interior, mlp, moe, recurrent, recurrent_interior, vision, edits, gradients, batching, availability, generation, hooks_path, toolkit_mappings  # noqa: F401 - registration
from .base import CHECKS, Case, Check, CheckFailure, Skip, Verdict, check, load_plugins, verdict

__all__ = ["CHECKS", "Case", "Check", "CheckFailure", "Skip", "Verdict", "check", "load_plugins", "verdict"]
