"""Flint: GPT-OSS's sink attention (with QK norms, and rotary only on sliding layers), a sigmoid mixture with a shared expert.

The router (``gate``) takes the top-k of the sigmoid of its logits, with no
selection bias, and renormalizes them when ``norm_topk_prob`` says so; the
shared expert is added in full, ungated, inside the block, so the block's
output is the whole contribution. Dense blocks (``mlp_only_layers``) keep
their neurons, and their routing values say they route nothing.
"""

from nnterp import SigmoidMoe, TinyConfig

from . import gpt_oss

FAMILY = gpt_oss.FAMILY.replace(
    name="flint",
    model_types=("flint",),
    rename={**gpt_oss.FAMILY.rename, "mlp.gate": "mlp.router", "mlp.shared_expert": "mlp.shared_experts"},
    envoys={**gpt_oss.FAMILY.envoys, "layers.*.mlp": SigmoidMoe},
    tiny={"flint": TinyConfig("flint", {"sliding_window": 4, "mlp_only_layers": [0]})},
)
