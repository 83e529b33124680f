"""BERT's block moved to pre-LN: a LayerNorm before each sublayer, each sublayer's ``dense`` output added straight to the stream.

RoBERTa-PreLayerNorm, XLM-RoBERTa-XL and Megatron-BERT keep BERT's modules
(``attention.self``, ``attention.output``, ``intermediate``, ``output``) but
normalize the stream *before* each sublayer; ``attention.output`` and the
block's ``output`` return ``input + dropout(dense(x))``. In eval the dropout
hands back ``dense``'s output itself, so that tensor (bias included) is what the
block adds to the stream: the attention's contribution is ``o_proj``'s output and
the MLP's the block's ``output.dense`` output, and
``layer_input + attention_output + mlp_output == layer_output`` holds. A final
LayerNorm after the last block feeds the LM head: it is the ``norm``.

Where each model keeps its two pre-norms differs, and the copies say where.
"""

from typing import Any, ClassVar

from nnterp import Attention, Family, Layer, Mlp

from torch import Tensor

from .bert import BLOCK, BertAttention, BertMlp


def rename(backbone: str, head: str, norm: str) -> dict[str, str]:
    """The ``rename`` of a pre-LN copy of BERT: encoder under ``backbone``, LM head ``head``, final LayerNorm ``norm``."""
    return {
        f"{backbone}.encoder.layer": "layers",
        f"{backbone}.embeddings.word_embeddings": "embed_tokens",
        norm: "norm",
        head: "lm_head",
        **BLOCK,
    }


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The final LayerNorm, then the whole LM head (its dense, activation and LayerNorm transform, then the decoder)."""
    return model.lm_head(model.norm(hidden))


class PreLNBertLayer(Layer):
    """A pre-LN BERT block: the MLP is called with the mid stream, its pre-norm inside ``intermediate``.

    The copies whose MLP pre-norm sits on the block itself move
    ``layer_mid`` and ``mlp_norm_output`` to it.
    """

    norm_readers: ClassVar[dict[str, str]] = {
        Layer.attention_norm_output.name: "self_attn.self.input",
        Layer.mlp_norm_output.name: "mlp.up_proj.input",
    }

    attention_norm_output = Layer.attention_norm_output.at("self_attn.LayerNorm.output")
    layer_mid = Layer.layer_mid.at("mlp.input")
    mlp_norm_output = Layer.mlp_norm_output.at("mlp.LayerNorm.output")


class PreLNBertAttention(BertAttention):
    # attention.output returns input + dropout(dense(context)): dense's output (bias included) is what is added
    attention_output = Attention.attention_output.at("o_proj.output", select=None)


class PreLNBertMlp(BertMlp):
    # the block's output returns mid + dropout(dense(neurons)): that dense's output is what is added
    mlp_output = Mlp.mlp_output.at("../E_output.dense.output", select=None)


#: the base of the pre-LN copies (each serves its own model type, under its own names)
FAMILY = Family(
    name="pre_ln_bert",
    envoys={"layers.*": PreLNBertLayer, "layers.*.self_attn": PreLNBertAttention, "layers.*.mlp": PreLNBertMlp},
    project_on_vocab=project_on_vocab,
)
