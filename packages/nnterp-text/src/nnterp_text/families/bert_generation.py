"""BertGeneration: BERT's block under ``bert``; its LM head is the decoder alone."""

from . import bert

FAMILY = bert.FAMILY.replace(
    name="bert_generation",
    model_types=("bert-generation",),
    rename=bert.rename("bert", "lm_head"),
    tiny=bert.tiny_decoder("bert-generation"),
    skips={"bert-generation": bert.POST_LN_SKIPS},
)
