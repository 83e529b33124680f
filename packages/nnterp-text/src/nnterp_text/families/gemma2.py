"""Gemma-2: the sandwich block under Gemma's own norm names, and softcapped logits.

``post_attention_layernorm`` follows the attention here (the naming trap:
on Llama it is the MLP's pre-norm), so the contributions are the post norms'
outputs and the MLP's pre-norm is ``pre_feedforward_layernorm``.
"""

from nnterp import PostNormAttention, PostNormMlp, SandwichLayer
from nnterp.families import default
from nnterp.logits import softcapped as project_on_vocab  # noqa: F401 - the family's logits

RENAME = default.RENAME
ENVOYS = {"layers.*": SandwichLayer, "layers.*.self_attn": PostNormAttention, "layers.*.mlp": PostNormMlp}
