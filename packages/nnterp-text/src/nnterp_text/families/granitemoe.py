"""Granite-MoE: Granite's scaled block with its mixture of experts at ``block_sparse_moe``."""

from nnterp_text.families.granite import ENVOYS, project_on_vocab  # noqa: F401 - the family's diff of Granite
from nnterp_text.families.granite import RENAME as GRANITE

RENAME = {**GRANITE, "block_sparse_moe": "mlp"}
