"""RemBERT: BERT's post-LN block under ``rembert``, embeddings of their own width, its attention's own arithmetic.

The embeddings are ``input_embedding_size`` wide; the encoder's
``embedding_hidden_mapping_in`` projects them to ``hidden_size`` before the
first block, so ``embed_tokens`` is the (narrower) token table and the stream
entering the first block is that projection's output. The head
(``cls.predictions``: dense to ``output_embedding_size``, activation,
LayerNorm, decoder) reads the last block's output.
"""

from .post_ln_own_attention import *  # noqa: F403
from .post_ln_own_attention import TUPLE_ENVOYS, rename

RENAME = rename("rembert", "cls.predictions")
# the block returns (hidden, (attentions)): the encoder reads [0]
ENVOYS = TUPLE_ENVOYS
