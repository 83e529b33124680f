"""OPT: BioGPT's inline MLP, on token-flat rows; queries pre-scaled; ``project_out`` before ``lm_head``; post-LN refused."""

from typing import Any

from nnterp import Attention, EProperty, Family, FamilyMismatch, Layer, Mlp, TinyConfig, TokenEProperty
from nnterp.logits import unembed

from torch import Tensor

from .inline_mlp import InlineMlp, InlineMlpLayer
from .own_attention import viewed
from .xglm import PROJECTED_HEADS

POST_LN = (
    "do_layer_norm_before=False (OPT-350m): a post-LN model, normalized after each sublayer is added "
    "and without a final norm, so no contribution sums from layer_input to layer_output; not served"
)


def token_flat(value: EProperty, key: str, **changes: Any) -> TokenEProperty:
    """``value`` read at ``key``, where the model holds it flat over tokens: a ``TokenEProperty`` with its meaning."""
    return value.evolve(kind=TokenEProperty, key=key, **changes)


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The final norm, ``project_out`` where the embeddings are narrower than the stream (``word_embed_proj_dim``), then ``lm_head``."""
    project_out = model._module.model.decoder.project_out
    if project_out is None:
        return unembed(model, hidden)
    return model.lm_head(model.model.decoder.project_out(model.norm(hidden)))


class OPTLayer(InlineMlpLayer):
    """An OPT block: its ``final_layer_norm`` is the MLP's pre-norm, and everything from it on is token-flat."""

    #: the sum ``residual + hidden_states`` before the block flattens it: the flat tensor is a view of it under two names
    #: (the residual and the norm's input), so a write here, and a gradient, reach both
    layer_mid = Layer.layer_mid.at("source.hidden_states_2.output")
    mlp_norm_output = token_flat(Layer.mlp_norm_output, "final_layer_norm.output")
    mlp_input = token_flat(Layer.mlp_input, "mlp.up_proj.input")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self._module.do_layer_norm_before:
            raise FamilyMismatch(POST_LN)
        object.__setattr__(self, "post_attention_layernorm", self.final_layer_norm)
        self._aliases["post_attention_layernorm"] = "final_layer_norm"


class OPTAttention(Attention):
    """OPT scales its queries by ``head_dim ** -0.5`` as it projects them: served as projected, as XGLM's are."""

    # instrumented at construction: the queries are read in the forward before the interface's values
    sourced = True
    attention_queries = viewed(Attention.attention_queries, "q_proj.output", *PROJECTED_HEADS, select=None)


class OPTMlp(InlineMlp):
    """OPT's inline feed-forward on token-flat rows: its contribution is the dropout after ``fc2`` (_0 follows the attention)."""

    mlp_output = token_flat(Mlp.mlp_output, "../source.nn_functional_dropout_1.output", select=None)
    mlp_activation = token_flat(Mlp.mlp_activation, "act_fn.output")
    mlp_neurons = token_flat(Mlp.mlp_neurons, "down_proj.input")


FAMILY = Family(
    name="opt",
    model_types=("opt",),
    rename={
        "model.decoder.layers": "layers",
        "model.decoder.embed_tokens": "embed_tokens",
        "model.decoder.final_layer_norm": "norm",
        "self_attn.out_proj": "self_attn.o_proj",
        "self_attn_layer_norm": "input_layernorm",
        # the block's final_layer_norm (its MLP's pre-norm) is aliased by OPTLayer: the decoder's
        # final norm has the same name, and a rename key would alias both
    },
    envoys={"layers.*": OPTLayer, "layers.*.self_attn": OPTAttention, "layers.*.mlp": OPTMlp},
    project_on_vocab=project_on_vocab,
    tiny={
        "opt": TinyConfig("opt", {"num_hidden_layers": 3}),
        "opt-projected": TinyConfig("opt", {"num_hidden_layers": 3, "word_embed_proj_dim": 32}),
    },
)
