"""dots3 (text): latent attention, its width differing by layer, each head gated before ``o_proj``: served as Laguna is.

Its sparse blocks are DeepSeek-V3's mixture (sigmoid router, selection bias,
groups, shared experts), not Laguna's.
"""

from nnterp_text.families.deepseek_v3 import SigmoidMoe
from nnterp_text.families.laguna import ENVOYS as LAGUNA
from nnterp_text.families.laguna import RENAME  # noqa: F401 - the same diff of the default

ENVOYS = {**LAGUNA, "layers.*.mlp": SigmoidMoe}
