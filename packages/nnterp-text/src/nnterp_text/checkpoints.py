"""The tiny checkpoints of this package's families, by checkpoint name (the ``nnterp.checkpoints`` table).

Each is its model type's config shrunk by ``TinyConfig`` (a width of 64, a few
layers and heads), with the fields a family needs on top.
"""

from nnterp import TinyConfig

TINY_CONFIGS: dict[str, TinyConfig] = {
    "gpt2": TinyConfig("gpt2", {"n_layer": 3, "n_inner": 128}),
    "gpt2-reorder": TinyConfig("gpt2", {"n_layer": 3, "n_inner": 128, "reorder_and_upcast_attn": True}),
}
