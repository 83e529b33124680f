"""RoBERTa-PreLayerNorm: the pre-LN BERT block under ``roberta_prelayernorm``, RoBERTa's embeddings and head.

The attention's pre-norm is ``attention.LayerNorm``, the MLP's ``intermediate.LayerNorm``
(inside the ``mlp``, which is called with the mid stream); the final LayerNorm is
the backbone's ``LayerNorm``, applied to the last block's output before ``lm_head``.
"""

from . import bert, pre_ln_bert, roberta

FAMILY = pre_ln_bert.FAMILY.replace(
    name="roberta_prelayernorm",
    model_types=("roberta-prelayernorm",),
    rename=pre_ln_bert.rename("roberta_prelayernorm", "lm_head", "roberta_prelayernorm.LayerNorm"),
    position_ids=roberta.position_ids,
    # eps 1e-5, not the class default 1e-12: with that the final LayerNorm undoes a scaled last-block output
    # exactly in float32, so an edit there would reach nothing
    tiny=bert.tiny_decoder("roberta-prelayernorm", layer_norm_eps=1e-5),
)
