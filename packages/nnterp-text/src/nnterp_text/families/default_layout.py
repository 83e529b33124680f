"""The text model types whose modules are the default block under the default names: ``nnterp.families.default``'s, with their checkpoints.

The kit proves each on its tiny checkpoint; a few load only once the tiny
config fits them (latent attention, grouped routing, fields their class
requires).
"""

from nnterp import TinyConfig
from nnterp.families import default

from ..tiny import MLA

#: the default pre-norm block on the shared attention interface, under the default names
LAYOUT = (
    "arcee",
    "cwm",
    "ernie4_5",
    "gemma",
    "glm",
    "helium",
    "internlm3",
    "iquestcoder",
    "jais2",
    "ministral3",
    "moshi",
    "olmo",
    "phi3",
    "phi4_multimodal",
    "seed_oss",
    "smollm3",
    "starcoder2",
)

FAMILY = default.FAMILY.replace(
    name="default_layout",
    model_types=(*LAYOUT, "hunyuan_v1_dense", "ministral", "nemotron", "youtu"),
    tiny={
        **{model_type: TinyConfig(model_type) for model_type in LAYOUT},
        # the default block once the tiny config fits them (latent attention, required fields)
        "ministral": TinyConfig("ministral", {"num_hidden_layers": 3, "head_dim": 16}),
        "nemotron": TinyConfig("nemotron", {"num_hidden_layers": 3, "head_dim": 16, "num_key_value_heads": 2}),
        "hunyuan_v1_dense": TinyConfig("hunyuan_v1_dense", {"num_hidden_layers": 3, "head_dim": 16}),
        "youtu": TinyConfig("youtu", {**MLA, "num_hidden_layers": 3}),
    },
    skips={
        "glm": {
            "neurons_make_contribution": "no act_fn module on this block",
        },
        "moshi": {
            "neurons_make_contribution": "no act_fn module on this block",
        },
        "phi3": {
            "neurons_make_contribution": "no act_fn module on this block",
        },
        "phi4_multimodal": {
            "neurons_make_contribution": "no act_fn module on this block",
        },
        "starcoder2": {
            "neurons_make_contribution": "no act_fn module on this block",
        },
    },
)
