"""XLM-RoBERTa-XL: the pre-LN BERT block under ``roberta``, RoBERTa's embeddings and head.

The attention's pre-norm is ``attention.self_attn_layer_norm``; the MLP's is the
block's own ``LayerNorm``, called in ``feed_forward_chunk`` with the mid stream
before ``intermediate``. The final LayerNorm is ``roberta.encoder.LayerNorm``.
"""

from nnterp import Layer

from . import bert, pre_ln_bert, roberta
from .pre_ln_bert import PreLNBertLayer


class XLMRobertaXLLayer(PreLNBertLayer):
    """The MLP's pre-norm is the block's ``LayerNorm``: the mid stream is its input, the MLP is called with its output."""

    attention_norm_output = Layer.attention_norm_output.at("self_attn.self_attn_layer_norm.output")
    layer_mid = Layer.layer_mid.at("LayerNorm.input")
    mlp_norm_output = Layer.mlp_norm_output.at("LayerNorm.output")


FAMILY = pre_ln_bert.FAMILY.replace(
    name="xlm_roberta_xl",
    model_types=("xlm-roberta-xl",),
    rename=pre_ln_bert.rename("roberta", "lm_head", "roberta.encoder.LayerNorm"),
    envoys={**pre_ln_bert.FAMILY.envoys, "layers.*": XLMRobertaXLLayer},
    position_ids=roberta.position_ids,
    tiny=bert.tiny_decoder("xlm-roberta-xl"),
)
