"""Persimmon: the default sequential block, with Phi's ``dense`` and ``final_layernorm`` and GPT-NeoX's MLP names."""

from nnterp.families import default

from . import gpt_neox, phi

RENAME = {**phi.STACK_RENAME, **gpt_neox.MLP_RENAME}
ENVOYS = default.ENVOYS
