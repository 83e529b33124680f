"""Falcon-Mamba: Mamba's blocks, with weightless RMS norms on the mixer's B, C and dt before the scan.

The norms sit before the kernel call, so ``attention_queries`` (C) and
``attention_keys`` (B) are the normed vectors the scan receives, and
``betas`` the step size made from the normed dt. Everything else is Mamba's.
"""

from . import mamba

MODELING = ("transformers.models.falcon_mamba.modeling_falcon_mamba",)

RENAME = mamba.RENAME
ENVOYS = mamba.ENVOYS
