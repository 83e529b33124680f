"""Qwen3.5: Qwen3-Next's blocks with a dense MLP."""

from nnterp import Mlp
from nnterp.families import default

from .qwen3_next import ENVOYS as QWEN3_NEXT

MODELING = ("transformers.models.qwen3_5.modeling_qwen3_5",)
RENAME = default.RENAME
ENVOYS = {**QWEN3_NEXT, "layers.*.mlp": Mlp}
