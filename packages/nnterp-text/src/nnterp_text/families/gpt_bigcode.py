"""GPT-BigCode (SantaCoder, StarCoder 1): GPT-2's block and names on ``nn.Linear``, multi-query attention on the shared interface."""

from nnterp.families import default

from . import gpt2

RENAME = gpt2.RENAME
ENVOYS = default.ENVOYS
