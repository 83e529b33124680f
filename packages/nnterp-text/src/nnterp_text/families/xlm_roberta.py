"""XLM-RoBERTa: RoBERTa's block and head, under the same names."""

from . import bert, roberta

FAMILY = roberta.FAMILY.replace(
    name="xlm_roberta",
    model_types=("xlm-roberta",),
    tiny=bert.tiny_decoder("xlm-roberta"),
    skips={"xlm-roberta": bert.POST_LN_SKIPS},
)
