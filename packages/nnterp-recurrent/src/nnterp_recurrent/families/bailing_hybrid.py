"""Bailing-Hybrid: Kimi-Linear's blocks under its own classes; its latent attention gates each head's output (a sigmoid) before o_proj."""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import GatedAttention
from nnterp_text.families import deepseek_v3
from transformers.models.bailing_hybrid import modeling_bailing_hybrid as modeling

from .kimi_linear import KimiDeltaAttention

MODELING = (modeling.__name__,)
RENAME = {**deepseek_v3.RENAME, modeling.BailingHybridDeltaAttention: "linear_attn"}
ENVOYS = {
    **deepseek_v3.ENVOYS,
    "layers.*.self_attn": GatedAttention,
    modeling.BailingHybridDeltaAttention: KimiDeltaAttention,
}
