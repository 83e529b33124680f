"""GIT as a text-only causal LM: BERT's post-LN block under ``git``, its attention's own arithmetic, a plain Linear head.

The block (``attention.self``, ``attention.output``, ``intermediate``,
``output``) and its streams are BERT's: each sublayer's residual add and the
LayerNorm after it happen in one submodule, so the contributions are
unavailable. ``attention.self`` computes its scores, softmax, dropout and
context itself, as Megatron-BERT's does, so the interior is read where
``post_ln_own_attention`` reads it. The embeddings (word and absolute
positions) are normalized before the first block; the head is the root's
``output`` Linear, reading the last block's normalized output. Without
``pixel_values`` the image encoder does not run and the stream holds the text
tokens alone; with them the image tokens come first in every stream.
"""

from nnterp import TinyConfig

from . import bert, post_ln_own_attention

FAMILY = post_ln_own_attention.FAMILY.replace(
    name="git",
    model_types=("git",),
    # the head is the root's ``output`` (mounted as ``E_output``), a name every block and attention also holds: the key
    # reaches it through ``root`` from any envoy, and the dotted alias binds ``lm_head`` on the root alone
    rename={**bert.rename("git", "root.E_output"), "root.E_output": "root.lm_head"},
    tiny={"git": TinyConfig("git")},
    skips={"git": bert.POST_LN_SKIPS},
)
