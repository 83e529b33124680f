"""CodeGen: GPT-J's block and names, its queries, keys and values from one fused ``qkv_proj``."""

from nnterp import TinyConfig

from . import gptj

FAMILY = gptj.FAMILY.replace(
    name="codegen",
    model_types=("codegen",),
    tiny={"codegen": TinyConfig("codegen", {"n_layer": 3, "rotary_dim": 8})},
    skips={
        "codegen": {
            "mid_stream": "a parallel block",
        },
    },
)
