"""OLMoE: the default block, its MLP a mixture of experts: ``gate`` a softmax router, ``experts`` fused.

The router takes the top-k of the softmax and renormalizes them when the
config's ``norm_topk_prob`` says so, as ``Moe`` reads it. Most softmax
mixtures (Qwen3-MoE, Mellum, Mixtral ...) are this family or a diff of it.
"""

from nnterp import Moe, TinyConfig
from nnterp.families import default

FAMILY = default.FAMILY.replace(
    name="olmoe",
    model_types=("olmoe", "qwen3_moe", "mellum"),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={**default.FAMILY.envoys, "layers.*.mlp": Moe},
    tiny={model_type: TinyConfig(model_type) for model_type in ("olmoe", "qwen3_moe", "mellum")},
    skips={
        "mellum": {
            "neurons_make_contribution": "a mixture of experts",
        },
        "olmoe": {
            "neurons_make_contribution": "a mixture of experts",
        },
        "qwen3_moe": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
