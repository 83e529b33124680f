"""Flint: GPT-OSS's sink attention (with QK norms, and rotary only on sliding layers), a sigmoid mixture with a shared expert.

The router (``gate``) takes the top-k of the sigmoid of its logits, with no
selection bias, and renormalizes them when ``norm_topk_prob`` says so; the
shared expert is added in full, ungated, inside the block, so the block's
output is the whole contribution. Dense blocks (``mlp_only_layers``) keep
their neurons, and their routing values say they route nothing.
"""

from nnterp import Moe

from .gpt_oss import ENVOYS as GPT_OSS
from .gpt_oss import RENAME as GPT_OSS_NAMES


class FlintMoe(Moe):
    SCORING = "sigmoid"


RENAME = {**GPT_OSS_NAMES, "mlp.gate": "mlp.router", "mlp.shared_expert": "mlp.shared_experts"}
ENVOYS = {**GPT_OSS, "layers.*.mlp": FlintMoe}
