"""GLM-MoE-DSA: the default block on latent attention, returning the stream with the top-k keys its indexer chose,
which a later layer may reuse; a skipped block hands on the selection it received. Its sparse blocks are
DeepSeek-V3's mixture."""

from typing import Any, ClassVar

from nnterp import Layer, TinyConfig

from ..tiny import INDEXER, MLA, SPARSE
from . import deepseek_v3


class CarryingLayer(Layer):
    """A block called with a state from the block before and returning ``(stream, state)``.

    ``carried`` names the argument the state comes in as (keyword, else its
    position). A skipped block does not run, so it hands on the state it was
    called with, unchanged, beside ``hidden``.
    """

    returns_tuple: ClassVar[bool] = True
    #: the argument the state comes in as, ``(keyword, position)``: GLM-MoE-DSA's ``prev_topk_indices`` here; a family
    #: whose block carries another state names its own (ZAYA's router states, Kolibri-1.1's key pool)
    carried: ClassVar[tuple[str, int]] = ("prev_topk_indices", 6)

    def carries(self) -> str | None:
        return f"the state later blocks reuse ({self.carried[0]})"

    def skip(self, hidden: Any) -> None:
        args, kwargs = self.inputs
        name, position = self.carried
        state = kwargs[name] if name in kwargs else args[position] if len(args) > position else None
        super(Layer, self).skip((hidden, state))


FAMILY = deepseek_v3.FAMILY.replace(
    name="glm_moe_dsa",
    model_types=("glm_moe_dsa",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*": CarryingLayer},
    # every indexer full: skipping a full one leaves a shared one after it without indices, and the model errors
    tiny={
        "glm_moe_dsa": TinyConfig(
            "glm_moe_dsa",
            {**MLA, **SPARSE, **INDEXER, "num_hidden_layers": 3, "indexer_types": ["full", "full", "full"]},
        )
    },
)
