"""DeepSeek-V3: the default block (latent attention), dense first blocks, then mixtures with a sigmoid router.

The router scores with a sigmoid, chooses by the scores plus its
``e_score_correction_bias`` within the best ``topk_group`` of ``n_group``
groups, weighs by the unbiased scores, renormalizes (``norm_topk_prob``) and
scales (``routed_scaling_factor``): ``Moe.route`` reads each from the router
(``SigmoidMoe``). ``shared_experts`` runs beside the routed ones. The first
``first_k_dense_replace`` blocks are dense: their routing values say so.
"""

from nnterp import SigmoidMoe, TinyConfig
from nnterp.families import default

from ..tiny import GROUPED_ROUTE, INDEXER, MLA, ROUTE, SPARSE

FAMILY = default.FAMILY.replace(
    name="deepseek_v3",
    model_types=("deepseek_v3", "deepseek_v32", "dots1", "glm4_moe", "glm4_moe_lite", "exaone_moe", "solar_open"),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={**default.FAMILY.envoys, "layers.*.mlp": SigmoidMoe},
    tiny={
        "deepseek_v3": TinyConfig("deepseek_v3", {**MLA, **ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1}),
        "deepseek_v3-grouped": TinyConfig(
            "deepseek_v3", {**MLA, **GROUPED_ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1}
        ),
        "deepseek_v32": TinyConfig("deepseek_v32", {**MLA, **ROUTE, **SPARSE, **INDEXER, "num_hidden_layers": 3}),
        "glm4_moe_lite": TinyConfig("glm4_moe_lite", {**MLA, **SPARSE, "num_hidden_layers": 3}),
        **{model_type: TinyConfig(model_type) for model_type in ("dots1", "glm4_moe", "exaone_moe", "solar_open")},
        # config-only types of transformers that build DeepSeek-V3's and GLM-4-MoE's classes: served by class, not listed
        "sarvam_mla": TinyConfig("sarvam_mla", {**MLA, **ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1}),
        "sarvam_moe": TinyConfig("sarvam_moe"),
        "param2moe": TinyConfig("param2moe"),
    },
    skips={
        "dots1": {
            "neurons_make_contribution": "a mixture of experts",
        },
        "solar_open": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
