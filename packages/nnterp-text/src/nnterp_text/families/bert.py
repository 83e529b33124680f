"""BERT as a causal LM: a post-LN encoder block whose sublayers add the residual inside themselves, and no final norm.

``attention.output`` computes ``LayerNorm(dense(context) + layer_input)`` and
the block's ``output`` ``LayerNorm(dense(intermediate) + layer_mid)``: each
sublayer's residual add and the norm after it happen in one submodule, so what
a sublayer changes in the stream includes that norm and is no tensor of the
model. The contributions are unavailable; the streams (``layer_input``,
``layer_mid``, the attention's normalized output, and ``layer_output``), the
attention's interior (read in ``attention.self`` on the shared interface) and
the MLP's activation and neurons are served. The feed-forward is split over
two modules: ``intermediate`` (``dense`` then the activation) is the ``mlp``
and the block's ``output.dense`` its down projection. nnsight mounts every
native ``output`` submodule as ``E_output``, its ``output`` being the served
value. The head (``cls.predictions``: dense, activation, LayerNorm, decoder)
is the ``lm_head`` and reads the last block's normalized output directly.

Its renamed copies (RoBERTa, CamemBERT, ELECTRA ...) are diffs of this
family: ``rename`` gives their prefixes, ``tiny_decoder`` their checkpoints.
"""

from typing import Any

from nnterp import Attention, Family, Mlp, PostNormLayer, TinyConfig, each_interior, unavailable

from torch import Tensor

from .openai_gpt import POST_LN, POST_LN_SKIPS

#: the modules inside one block, the same on every copy of BERT
BLOCK = {
    "attention": "self_attn",
    "attention.self.query": "attention.q_proj",
    "attention.self.key": "attention.k_proj",
    "attention.self.value": "attention.v_proj",
    "attention.E_output.dense": "attention.o_proj",
    "intermediate": "mlp",
    "intermediate.dense": "intermediate.up_proj",
    "intermediate.intermediate_act_fn": "intermediate.act_fn",
}


def rename(backbone: str, head: str) -> dict[str, str]:
    """The ``rename`` of a copy of BERT whose encoder is ``backbone`` and whose LM head is ``head``."""
    return {
        f"{backbone}.encoder.layer": "layers",
        f"{backbone}.embeddings.word_embeddings": "embed_tokens",
        head: "lm_head",
        **BLOCK,
    }


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The whole LM head (its dense, activation and LayerNorm transform, then the decoder) on the stream."""
    return model.lm_head(hidden)


def _in_self(value: Any) -> Any:
    """An interior value of the shared interface, read in ``attention.self``, where the interface is called."""
    return value.at(f"self.{value.key}")


class BertLayer(PostNormLayer):
    """A post-LN block returning its stream bare; the MLP reads the mid stream, the attention's normalized output."""


@each_interior(_in_self)
class BertAttention(Attention):
    attention_output = unavailable(
        POST_LN.format(
            sublayer="attention",
            stream="layer_mid",
            norm="attention.output.LayerNorm",
            residual="layer_input",
            native="self_attn.o_proj.output",
        )
    )


class BertMlp(Mlp):
    mlp_output = unavailable(
        POST_LN.format(
            sublayer="MLP",
            stream="layer_output",
            norm="output.LayerNorm",
            residual="layer_mid",
            native="mlp.down_proj.output",
        )
    )
    # the intermediate returns act(dense(x)): the activation's output is the neurons the block's output.dense sums
    mlp_neurons = Mlp.mlp_neurons.at("output")

    @property
    def down_proj(self) -> Any:
        """The down projection: the block's ``output.dense``, a sibling of the intermediate."""
        return self.parent.E_output.dense

    @property
    def intermediate_size(self) -> int:
        return int(self.up_proj._module.out_features)


def tiny_decoder(model_type: str, **fields: object) -> dict[str, TinyConfig]:
    """The tiny checkpoint of a copy of BERT, named as its model type: ``is_decoder`` makes its attention causal, as a causal LM's."""
    return {model_type: TinyConfig(model_type, {"is_decoder": True, **fields})}


FAMILY = Family(
    name="bert",
    model_types=("bert",),
    rename=rename("bert", "cls.predictions"),
    envoys={"layers.*": BertLayer, "layers.*.self_attn": BertAttention, "layers.*.mlp": BertMlp},
    no_final_norm="a post-LN model: the last block's output LayerNorm normalizes the stream the LM head reads; there is no final norm",
    project_on_vocab=project_on_vocab,
    tiny=tiny_decoder("bert"),
    skips={"bert": POST_LN_SKIPS},
)
