"""Falcon-Mamba: Mamba's blocks, with weightless RMS norms on the mixer's B, C and dt before the scan.

The norms sit before the kernel call, so ``attention_queries`` (C) and
``attention_keys`` (B) are the normed vectors the scan receives, and
``betas`` the step size made from the normed dt. Everything else is Mamba's.
"""

from nnterp.tiny import TinyConfig

from ..tiny import SELECTIVE_SCAN
from . import mamba

FAMILY = mamba.FAMILY.replace(
    name="falcon_mamba",
    model_types=("falcon_mamba",),
    modeling=("transformers.models.falcon_mamba.modeling_falcon_mamba",),
    tiny={"falcon_mamba": TinyConfig("falcon_mamba", SELECTIVE_SCAN)},
    skips={
        "falcon_mamba": {
            "mid_stream": "no post_attention_layernorm module on this block",
        },
    },
)
