"""Bailing-Hybrid: Kimi-Linear's blocks under its own classes; its latent attention gates each head's output (a sigmoid) before o_proj."""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import GatedAttention
from nnterp.tiny import TinyConfig

from transformers.models.bailing_hybrid import modeling_bailing_hybrid as modeling

from ..tiny import KIMI_DELTA
from . import kimi_linear

FAMILY = kimi_linear.FAMILY.replace(
    name="bailing_hybrid",
    model_types=("bailing_hybrid",),
    modeling=(modeling.__name__,),
    rename={**kimi_linear.BLOCK_NAMES, modeling.BailingHybridDeltaAttention: "linear_attn"},
    envoys={
        **kimi_linear.BLOCK,
        "layers.*.self_attn": GatedAttention,
        modeling.BailingHybridDeltaAttention: kimi_linear.KimiDeltaAttention,
    },
    tiny={"bailing_hybrid": TinyConfig("bailing_hybrid", KIMI_DELTA)},
)
