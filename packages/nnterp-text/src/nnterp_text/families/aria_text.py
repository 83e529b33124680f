"""Aria's text model: OLMoE's mixture under its own ``router``, which softmaxes the top-k logits; ``shared_experts`` beside."""

from nnterp import Moe, TinyConfig
from nnterp.families import default


class AriaMoe(Moe):
    LOGITS = "router.source.nn_functional_linear_0"
    TOPK_FIRST = True


FAMILY = default.FAMILY.replace(
    name="aria_text",
    model_types=("aria_text",),
    envoys={**default.FAMILY.envoys, "layers.*.mlp": AriaMoe},
    tiny={"aria_text": TinyConfig("aria_text")},
    skips={
        "aria_text": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
