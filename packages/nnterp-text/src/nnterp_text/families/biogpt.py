"""BioGPT: XGLM's block (feed-forward inline on the block) under BioGPT's names, its attention on the shared interface."""

from nnterp import Mlp, TinyConfig
from nnterp.families import default

from .inline_mlp import InlineMlp, InlineMlpLayer


class BioGptMlp(InlineMlp):
    """Its contribution is what the block adds after ``fc2``: the dropout after it (_0 follows the attention, _1 the activation)."""

    mlp_output = Mlp.mlp_output.at("../source.nn_functional_dropout_2.output", select=None)


FAMILY = default.FAMILY.replace(
    name="biogpt",
    model_types=("biogpt",),
    rename={
        "biogpt.layers": "layers",
        "biogpt.embed_tokens": "embed_tokens",
        "biogpt.layer_norm": "norm",
        "output_projection": "lm_head",
        "self_attn.out_proj": "self_attn.o_proj",
        "self_attn_layer_norm": "input_layernorm",
        "final_layer_norm": "post_attention_layernorm",
    },
    envoys={**default.FAMILY.envoys, "layers.*": InlineMlpLayer, "layers.*.mlp": BioGptMlp},
    tiny={"biogpt": TinyConfig("biogpt", {"num_hidden_layers": 3})},
)
