"""FlexOlmo: OLMo-2's post-norm block, its MLP OLMoE's mixture (``gate`` a softmax router, ``experts`` fused).

``mlp_output``, what the block adds, is ``post_feedforward_layernorm`` of
the mixture; ``mixture_output``, the routed experts' sum, is the norm's
input.
"""

from nnterp import Moe, PostNormMlp

from .olmo2 import ENVOYS as OLMO2
from .olmoe import RENAME  # noqa: F401 - OLMoE's names


class PostNormMoe(Moe, PostNormMlp):
    """A mixture whose contribution (``mlp_output``) is its post norm's output, ``post_feedforward_layernorm(mixture_output)``."""


ENVOYS = {**OLMO2, "layers.*.mlp": PostNormMoe}
