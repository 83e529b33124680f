"""How a family declares its tiny checkpoint: a model type and the config fields that shrink it.

A family package lists each under the ``nnterp.checkpoints`` entry-point group,
named as the checkpoint (a model type, or a model type with a variant:
``gpt2-reorder``), so the conformance kit writes and checks it without knowing
the family by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TinyConfig:
    """A checkpoint small enough for a CPU test: ``model_type``'s config with ``fields`` overridden.

    ``load`` holds keyword arguments the checkpoint is meant to be loaded with
    (``attn_implementation="eager"``), and ``vocab_size`` is what the fields'
    ``vocab_size`` must leave room for: the kit's byte-level tokenizer.
    """

    model_type: str
    fields: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=lambda: {"attn_implementation": "eager"})

    def config(self) -> Any:
        """The shrunk config, built through ``AutoConfig`` so its derived fields follow."""
        from transformers import AutoConfig

        return AutoConfig.for_model(self.model_type, **self.fields)
