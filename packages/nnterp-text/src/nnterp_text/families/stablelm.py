"""StableLM: the default names with GPT-NeoX's per-block switch; a parallel block has one norm for both sublayers."""

from nnterp.families import default

from .gpt_neox import SwitchedResidualLayer

RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*": SwitchedResidualLayer}
