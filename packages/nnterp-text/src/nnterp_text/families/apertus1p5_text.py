"""Apertus and Apertus 1.5's text model: the default block with its pre-norms under their own names, and an LM head that may be pruned.

``Apertus1p5TextModel`` is ``ApertusModel`` as it is, so the block is the
default one under the default names but for its two pre-norms,
``attention_layernorm`` and ``feedforward_layernorm``, which are aliased to
``input_layernorm`` and ``post_attention_layernorm``: the attention's and the
MLP's input norms, each read before its sublayer. The input embeddings keep
the extended vocabulary (text plus the visual and audio code ranges), while
``lm_head`` keeps only ``output_vocab_size`` rows when the config sets it:
the logits are that wide, their ids the first ``output_vocab_size`` token
ids. The pruned checkpoint proves the values on such a head.
"""

from nnterp import TinyConfig
from nnterp.families import default

FAMILY = default.FAMILY.replace(
    name="apertus1p5_text",
    model_types=("apertus", "apertus1p5_text"),
    rename={
        **default.FAMILY.rename,
        "attention_layernorm": "input_layernorm",
        "feedforward_layernorm": "post_attention_layernorm",
    },
    tiny={
        "apertus": TinyConfig("apertus"),
        "apertus1p5_text": TinyConfig("apertus1p5_text"),
        # the head pruned to the first 256 of the 320 token ids, as the released checkpoints prune theirs
        "apertus1p5_text_pruned": TinyConfig("apertus1p5_text", {"output_vocab_size": 256}),
    },
)
