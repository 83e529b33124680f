"""GPT-BigCode (SantaCoder, StarCoder 1): GPT-2's block and names on ``nn.Linear``, multi-query attention on the shared interface."""

from nnterp import TinyConfig
from nnterp.families import default

from . import gpt2

FAMILY = gpt2.FAMILY.replace(
    name="gpt_bigcode",
    model_types=("gpt_bigcode",),
    envoys=default.FAMILY.envoys,
    tiny={"gpt_bigcode": TinyConfig("gpt_bigcode", {"n_layer": 3})},
)
