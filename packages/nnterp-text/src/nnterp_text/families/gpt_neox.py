"""GPT-NeoX: its own names; each block is parallel or sequential as its ``use_parallel_residual`` says."""

from typing import Any

from nnterp import PARALLEL, Layer, ParallelLayer, TinyConfig
from nnterp.families import default

#: the MLP's names, shared with Persimmon
MLP_RENAME = {
    "mlp.dense_h_to_4h": "mlp.up_proj",
    "mlp.dense_4h_to_h": "mlp.down_proj",
    "mlp.act": "mlp.act_fn",
}


def parallel_residual(envoy: Any) -> str | None:
    """``PARALLEL`` where this block's ``use_parallel_residual`` is on, else None."""
    return PARALLEL if envoy._module.use_parallel_residual else None


class SwitchedResidualLayer(ParallelLayer):
    """A block whose forward is parallel or sequential by its own ``use_parallel_residual`` (GPT-NeoX, StableLM)."""

    layer_mid = Layer.layer_mid.at(unavailable=parallel_residual)


FAMILY = default.FAMILY.replace(
    name="gpt_neox",
    model_types=("gpt_neox",),
    rename={
        "gpt_neox.layers": "layers",
        "gpt_neox.embed_in": "embed_tokens",
        "gpt_neox.final_layer_norm": "norm",
        "attention": "self_attn",
        "attention.dense": "attention.o_proj",
        **MLP_RENAME,
    },
    envoys={**default.FAMILY.envoys, "layers.*": SwitchedResidualLayer},
    tiny={
        "gpt_neox": TinyConfig("gpt_neox", {"num_hidden_layers": 3}),
        "gpt_neox-sequential": TinyConfig("gpt_neox", {"num_hidden_layers": 3, "use_parallel_residual": False}),
    },
    skips={
        "gpt_neox": {
            "mid_stream": "a parallel block",
        },
    },
)
