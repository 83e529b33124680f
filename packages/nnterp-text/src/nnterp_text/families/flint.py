"""Flint: GPT-OSS's sink attention (with QK norms, and rotary only on sliding layers), a mixture of experts with a shared expert.

The shared expert is added inside the MoE block, so the block's output is the
whole contribution; dense blocks (``mlp_only_layers``) have their neurons.
"""

from .gpt_oss import ENVOYS, RENAME  # noqa: F401 - the family is GPT-OSS's
