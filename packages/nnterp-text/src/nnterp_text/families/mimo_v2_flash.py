"""MiMo-V2-Flash: queries and keys wider than values, and its own eager attention with a sink logit per head on sliding layers.

Its ``head_dim`` is the query/key width and ``v_head_dim`` the value width.
Its eager function subtracts each row's maximum before the softmax (on sliding
layers after appending the sink column), so the scores are read where the
mask has been added, before either. Its sparse blocks are DeepSeek-V3's
mixture without a shared expert.
"""

from typing import Any

from nnterp import Attention, INTERFACE, interface_reason
from nnterp.families import default

from .deepseek_v3 import RENAME  # noqa: F401 - the default names, the router as router
from .deepseek_v3 import SigmoidMoe

SINKS = (
    "a sliding layer with attention sinks: the softmax runs over the scores and one sink logit per head, "
    "so the softmax of no [batch, heads, query, key] tensor is the pattern"
)


def _scores_reason(envoy: Any) -> str | None:
    return interface_reason(envoy) or (SINKS if envoy._module.sinks is not None else None)


class MiMoAttention(Attention):
    attention_scores = Attention.attention_scores.at(
        f"source.{INTERFACE}.source.attn_weights_1.output", unavailable=_scores_reason
    )

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's queries and keys: the module's ``head_dim`` (its values are ``v_head_dim`` wide)."""
        return int(self._module.head_dim)


ENVOYS = {**default.ENVOYS, "layers.*.self_attn": MiMoAttention, "layers.*.mlp": SigmoidMoe}
