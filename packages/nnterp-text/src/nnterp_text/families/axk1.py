"""A.X-K1: DeepSeek-V3's block, its mixture ending in ``post_mlp_layernorm`` over the routed plus shared sum.

The norm sits inside the mixture's module, so ``mlp_output`` (what the
block adds) is the norm's output and ``mixture_output`` (the experts' sum)
is what the norm is called with.
"""

from nnterp import Moe

from .deepseek_v3 import ENVOYS as DEEPSEEK_V3
from .deepseek_v3 import RENAME, SigmoidMoe  # noqa: F401 - DeepSeek-V3's names


class Axk1Moe(SigmoidMoe):
    mixture_output = Moe.mixture_output.at("post_mlp_layernorm.input", select=None)


ENVOYS = {**DEEPSEEK_V3, "layers.*.mlp": Axk1Moe}
