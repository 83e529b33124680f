"""The identity checks, each a plain function ``check(model, case) -> detail`` usable in a notebook.

``verdict("contribution", model, ["Hello world"])`` runs one on plain prompts;
a ``Case`` also picks the block, head and edit a check exercises.

Importing this package registers every check in ``CHECKS``, in the order they run.
"""

from . import (  # noqa: F401 - registration
    attention,
    availability,
    batching,
    edits,
    generation,
    gradients,
    hooks_path,
    interior,
    mlp,
    moe,
    names,
    recurrent,
    recurrent_interior,
    residual,
    streams,
    toolkit_mappings,
    vision,
)
from .base import CHECKS, Case, Check, CheckFailure, Skip, Verdict, check, load_plugins, verdict

__all__ = ["CHECKS", "Case", "Check", "CheckFailure", "Skip", "Verdict", "check", "load_plugins", "verdict"]
