"""MiMo-V2-Flash: queries and keys wider than values, and its own eager attention with a sink logit per head on sliding layers.

Its ``head_dim`` is the query/key width and ``v_head_dim`` the value width.
Its eager function subtracts each row's maximum before the softmax (on sliding
layers after appending the sink column), so the scores are read where the
mask has been added, before either. Its sparse blocks are DeepSeek-V3's
mixture without a shared expert.
"""

from typing import Any

from nnterp import INTERFACE, Attention, TinyConfig, interface_reason

from ..tiny import SPARSE
from . import deepseek_v3

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


FAMILY = deepseek_v3.FAMILY.replace(
    name="mimo_v2_flash",
    model_types=("mimo_v2_flash",),
    envoys={**deepseek_v3.FAMILY.envoys, "layers.*.self_attn": MiMoAttention},
    tiny={
        "mimo_v2_flash": TinyConfig(
            "mimo_v2_flash",
            {
                "num_hidden_layers": 3,
                "head_dim": 24,
                "v_head_dim": 16,
                "sliding_window": 4,
                **SPARSE,
                "layer_types": ["full_attention", "sliding_attention", "full_attention"],
            },
        )
    },
)
