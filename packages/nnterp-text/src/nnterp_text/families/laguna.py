"""Laguna: the default block, each head's output gated (softplus) before ``o_proj``, so the heads are read where ``o_proj`` takes them."""

from nnterp import GatedAttention
from nnterp.families import default

RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*.self_attn": GatedAttention}
