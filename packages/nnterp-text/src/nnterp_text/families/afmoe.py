"""AFMoE: Gemma-2's sandwich block, its MLP's norms called ``pre_mlp_layernorm`` and ``post_mlp_layernorm``,
and each head's output gated before the projection.

Its sparse blocks (after the first ``num_dense_layers``) are a sigmoid mixture:
the router's ``gate`` Linear makes the logits, the top-k of the scores plus
the block's ``expert_bias`` are chosen, weighed by the unbiased scores,
renormalized and multiplied by ``route_scale``. A shared expert runs beside.
"""

from nnterp import GatedAttention, Moe, PostNormAttention, TinyConfig
from nnterp.families import default

from . import gemma2


class AfmoeAttention(GatedAttention, PostNormAttention):
    """Gated heads, and the post norm's output as the contribution."""


class AfmoeMoe(Moe):
    SCORING = "sigmoid"
    NORMALIZE = True
    LOGITS = "router.gate"

    mlp_output = Moe.mlp_output.at("../post_feedforward_layernorm.output", select=None)

    def selection_bias(self):
        """The block's ``expert_bias``, which it passes to the router."""
        return self._module.expert_bias


FAMILY = default.FAMILY.replace(
    name="afmoe",
    model_types=("afmoe",),
    rename={
        **default.FAMILY.rename,
        "pre_mlp_layernorm": "pre_feedforward_layernorm",
        "post_mlp_layernorm": "post_feedforward_layernorm",
    },
    envoys={**gemma2.FAMILY.envoys, "layers.*.self_attn": AfmoeAttention, "layers.*.mlp": AfmoeMoe},
    tiny={"afmoe": TinyConfig("afmoe")},
)
