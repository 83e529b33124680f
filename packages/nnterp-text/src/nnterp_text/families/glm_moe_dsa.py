"""GLM-MoE-DSA: the default block on latent attention, returning the stream with the top-k keys its indexer chose,
which a later layer may reuse; a skipped block hands on the selection it received. Its sparse blocks are
DeepSeek-V3's mixture."""

from typing import Any, ClassVar

from nnterp import Layer

from .deepseek_v3 import ENVOYS as DEEPSEEK_V3
from .deepseek_v3 import RENAME  # noqa: F401 - the default names, the router as router


class CarryingLayer(Layer):
    """A block called with a state from the block before and returning ``(stream, state)``.

    ``carried`` names the argument the state comes in as (keyword, else its
    position). A skipped block does not run, so it hands on the state it was
    called with, unchanged, beside ``hidden``.
    """

    returns_tuple: ClassVar[bool] = True
    carried: ClassVar[tuple[str, int]] = ("prev_topk_indices", 6)

    def skip(self, hidden: Any) -> None:
        args, kwargs = self.inputs
        name, position = self.carried
        state = kwargs[name] if name in kwargs else args[position] if len(args) > position else None
        super(Layer, self).skip((hidden, state))


ENVOYS = {**DEEPSEEK_V3, "layers.*": CarryingLayer}
