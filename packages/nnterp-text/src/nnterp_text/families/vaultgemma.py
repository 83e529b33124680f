"""VaultGemma: a pre-norm block whose MLP pre-norm is ``pre_feedforward_layernorm`` (no post norms), softcapped logits."""

from nnterp import Attention, Mlp, SandwichLayer
from nnterp.families import default
from nnterp.logits import softcapped as project_on_vocab  # noqa: F401 - the family's logits

RENAME = default.RENAME
ENVOYS = {"layers.*": SandwichLayer, "layers.*.self_attn": Attention, "layers.*.mlp": Mlp}
