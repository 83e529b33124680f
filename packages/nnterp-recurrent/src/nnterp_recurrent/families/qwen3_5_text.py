"""Qwen3.5: Qwen3-Next's blocks with a dense MLP."""

from nnterp import Mlp
from nnterp.families import default
from nnterp.tiny import TinyConfig

from ..tiny import DELTANET
from . import qwen3_next

FAMILY = qwen3_next.FAMILY.replace(
    name="qwen3_5_text",
    model_types=("qwen3_5_text",),
    modeling=("transformers.models.qwen3_5.modeling_qwen3_5",),
    rename=default.FAMILY.rename,
    envoys={**qwen3_next.FAMILY.envoys, "layers.*.mlp": Mlp},
    tiny={"qwen3_5_text": TinyConfig("qwen3_5_text", DELTANET)},
)
