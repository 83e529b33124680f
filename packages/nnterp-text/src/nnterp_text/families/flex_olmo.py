"""FlexOlmo: OLMo-2's post-norm block, its MLP OLMoE's mixture (``gate`` a softmax router, ``experts`` fused).

``mlp_output``, what the block adds, is ``post_feedforward_layernorm`` of
the mixture; ``mixture_output``, the routed experts' sum, is the norm's
input.
"""

from nnterp import Moe, PostNormMlp, TinyConfig

from . import olmo2, olmoe


class PostNormMoe(Moe, PostNormMlp):
    """A mixture whose contribution (``mlp_output``) is its post norm's output, ``post_feedforward_layernorm(mixture_output)``."""


FAMILY = olmo2.FAMILY.replace(
    name="flex_olmo",
    model_types=("flex_olmo",),
    rename=olmoe.FAMILY.rename,
    envoys={**olmo2.FAMILY.envoys, "layers.*.mlp": PostNormMoe},
    tiny={"flex_olmo": TinyConfig("flex_olmo")},
    skips={
        "flex_olmo": {
            "neurons_make_contribution": "a mixture of experts",
            "norm_outputs_feed_the_sublayers": "a post-norm block",
        },
    },
)
