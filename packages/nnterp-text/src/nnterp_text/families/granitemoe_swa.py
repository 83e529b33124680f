"""Granite-MoE SWA: Granite-MoE-Shared's block with Granite SWA's sliding-window, sink-scaled attention."""

from nnterp_text.families.granite_swa import GraniteSWAAttention
from nnterp_text.families.granitemoeshared import ENVOYS as SHARED
from nnterp_text.families.granitemoeshared import RENAME, project_on_vocab  # noqa: F401 - the family's logits

ENVOYS = {**SHARED, "layers.*.self_attn": GraniteSWAAttention}
