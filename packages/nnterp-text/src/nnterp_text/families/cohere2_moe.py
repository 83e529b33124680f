"""Cohere2-MoE: Cohere's parallel block, its sparse MLPs a mixture that scores the top-k logits by ``expert_selection_fn``.

The router takes the top-k of the raw logits, then softmaxes them, or
sigmoids them and renormalizes when ``norm_topk_prob`` says so. Under
``shared_expert_combination_strategy="average"`` the block halves the sum of
the routed and shared outputs, so ``routed_output``, ``expert_outputs`` and
``shared_expert_output`` are served halved: they add up to ``mlp_output``;
a write is doubled back. Blocks whose ``mlp_layer_types`` entry is "dense"
have no mixture.
"""

from nnterp import Moe, TinyConfig

from . import cohere
from .cohere import COHERE_SCALE


def combination(envoy) -> float:
    """What the block multiplies routed plus shared by: 1/2 when it averages them, else 1."""
    module = envoy._module
    averages = getattr(module, "num_shared_experts", 0) > 0 and module.shared_expert_combination_strategy == "average"
    return 0.5 if averages else 1.0


class CohereMoe(Moe):
    TOPK_FIRST = True
    routed_output = Moe.routed_output.scaled(combination)
    expert_outputs = Moe.expert_outputs.scaled(combination)
    shared_expert_output = Moe.shared_expert_output.scaled(combination)

    @property
    def SCORING(self) -> str:  # type: ignore[override]  # per model, from its router; the base's is a constant
        """The router's ``expert_selection_fn``: "softmax" or "sigmoid"."""
        return self.router._module.expert_selection_fn

    def normalizes(self) -> bool:
        """Only the sigmoid scores are renormalized (``norm_topk_prob``); a softmax of the top-k sums to one already."""
        return self.SCORING == "sigmoid" and super().normalizes()


#: three blocks, the first dense, with a shared expert beside the routed ones
MIXTURE = {
    "num_hidden_layers": 3,
    "sliding_window": 4,
    "mlp_layer_types": ["dense", "sparse", "sparse"],
    "num_shared_experts": 1,
    **COHERE_SCALE,
}

FAMILY = cohere.FAMILY.replace(
    name="cohere2_moe",
    model_types=("cohere2_moe",),
    rename={**cohere.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={**cohere.FAMILY.envoys, "layers.*.mlp": CohereMoe},
    tiny={
        "cohere2_moe": TinyConfig("cohere2_moe", MIXTURE),
        # the sigmoid router, its shared expert summed rather than averaged
        "cohere2_moe-sigmoid": TinyConfig(
            "cohere2_moe", {**MIXTURE, "expert_selection_fn": "sigmoid", "shared_expert_combination_strategy": "sum"}
        ),
    },
    skips={
        "cohere2_moe": {
            "mid_stream": "a parallel block",
        },
        "cohere2_moe-sigmoid": {
            "mid_stream": "a parallel block",
        },
    },
)
