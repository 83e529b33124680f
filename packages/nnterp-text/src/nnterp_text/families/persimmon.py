"""Persimmon: the default sequential block, with Phi's ``dense`` and ``final_layernorm`` and GPT-NeoX's MLP names."""

from nnterp import TinyConfig
from nnterp.families import default

from . import gpt_neox, phi

FAMILY = default.FAMILY.replace(
    name="persimmon",
    model_types=("persimmon",),
    rename={**phi.STACK_RENAME, **gpt_neox.MLP_RENAME},
    tiny={"persimmon": TinyConfig("persimmon", {"num_hidden_layers": 3})},
)
