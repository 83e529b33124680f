"""A.X-K1: DeepSeek-V3's block, its mixture ending in ``post_mlp_layernorm`` over the routed plus shared sum.

The norm sits inside the mixture's module, so ``mlp_output`` (what the
block adds) is the norm's output and ``mixture_output`` (the experts' sum)
is what the norm is called with.
"""

from nnterp import Moe, SigmoidMoe, TinyConfig

from ..tiny import MLA, ROUTE, SPARSE
from . import deepseek_v3


class Axk1Moe(SigmoidMoe):
    mixture_output = Moe.mixture_output.at("post_mlp_layernorm.input", select=None)


FAMILY = deepseek_v3.FAMILY.replace(
    name="axk1",
    model_types=("axk1",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*.mlp": Axk1Moe},
    tiny={"axk1": TinyConfig("axk1", {**MLA, **ROUTE, **SPARSE, "num_hidden_layers": 3})},
)
