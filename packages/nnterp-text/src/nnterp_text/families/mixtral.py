"""Mixtral: OLMoE's mixture, its router renormalizing the top-k probabilities whatever the config says (``MixtralMoe``)."""

from nnterp import MixtralMoe, TinyConfig

from . import olmoe

FAMILY = olmoe.FAMILY.replace(
    name="mixtral",
    model_types=("mixtral",),
    envoys={**olmoe.FAMILY.envoys, "layers.*.mlp": MixtralMoe},
    tiny={"mixtral": TinyConfig("mixtral")},
    skips={
        "mixtral": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
