"""RemBERT: BERT's post-LN block under ``rembert``, embeddings of their own width, its attention's own arithmetic.

The embeddings are ``input_embedding_size`` wide; the encoder's
``embedding_hidden_mapping_in`` projects them to ``hidden_size`` before the
first block, so ``embed_tokens`` is the (narrower) token table and the stream
entering the first block is that projection's output. The head
(``cls.predictions``: dense to ``output_embedding_size``, activation,
LayerNorm, decoder) reads the last block's output.
"""

from . import bert, post_ln_own_attention
from .post_ln_own_attention import TupleBertLayer

FAMILY = post_ln_own_attention.FAMILY.replace(
    name="rembert",
    model_types=("rembert",),
    rename=bert.rename("rembert", "cls.predictions"),
    # the block returns (hidden, (attentions)): the encoder reads [0]
    envoys={**post_ln_own_attention.FAMILY.envoys, "layers.*": TupleBertLayer},
    # embedding widths away from the hidden width, so the projections after the embeddings run
    tiny=bert.tiny_decoder("rembert", input_embedding_size=32, output_embedding_size=48),
    skips={"rembert": bert.POST_LN_SKIPS},
)
