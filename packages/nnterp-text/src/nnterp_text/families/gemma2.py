"""Gemma-2: the sandwich block under Gemma's own norm names, and softcapped logits.

``post_attention_layernorm`` follows the attention here (the naming trap:
on Llama it is the MLP's pre-norm), so the contributions are the post norms'
outputs and the MLP's pre-norm is ``pre_feedforward_layernorm``.
"""

from nnterp import PostNormAttention, PostNormMlp, SandwichLayer, TinyConfig
from nnterp.families import default
from nnterp.logits import softcapped

FAMILY = default.FAMILY.replace(
    name="gemma2",
    model_types=("gemma2", "gemma3_text"),
    envoys={"layers.*": SandwichLayer, "layers.*.self_attn": PostNormAttention, "layers.*.mlp": PostNormMlp},
    project_on_vocab=softcapped,
    tiny={
        "gemma2": TinyConfig("gemma2", {"final_logit_softcapping": 3.0, "attn_logit_softcapping": 5.0}),
        "gemma3_text": TinyConfig("gemma3_text"),
    },
)
