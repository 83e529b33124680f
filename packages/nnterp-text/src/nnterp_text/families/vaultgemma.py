"""VaultGemma: a pre-norm block whose MLP pre-norm is ``pre_feedforward_layernorm`` (no post norms), softcapped logits."""

from nnterp import Attention, Mlp, SandwichLayer, TinyConfig
from nnterp.families import default
from nnterp.logits import softcapped

FAMILY = default.FAMILY.replace(
    name="vaultgemma",
    model_types=("vaultgemma",),
    envoys={"layers.*": SandwichLayer, "layers.*.self_attn": Attention, "layers.*.mlp": Mlp},
    project_on_vocab=softcapped,
    tiny={"vaultgemma": TinyConfig("vaultgemma")},
)
