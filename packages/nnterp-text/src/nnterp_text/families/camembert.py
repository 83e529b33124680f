"""CamemBERT: RoBERTa's block and head, under the same names."""

from . import bert, roberta

FAMILY = roberta.FAMILY.replace(
    name="camembert",
    model_types=("camembert",),
    tiny=bert.tiny_decoder("camembert"),
    skips={"camembert": bert.POST_LN_SKIPS},
)
