"""StableLM: the default names with GPT-NeoX's per-block switch; a parallel block has one norm for both sublayers."""

from nnterp import TinyConfig
from nnterp.families import default

from .gpt_neox import SwitchedResidualLayer

FAMILY = default.FAMILY.replace(
    name="stablelm",
    model_types=("stablelm",),
    envoys={**default.FAMILY.envoys, "layers.*": SwitchedResidualLayer},
    tiny={
        "stablelm": TinyConfig("stablelm"),
        "stablelm-parallel": TinyConfig("stablelm", {"num_hidden_layers": 3, "use_parallel_residual": True}),
    },
    skips={
        "stablelm-parallel": {
            "mid_stream": "a parallel block",
        },
    },
)
