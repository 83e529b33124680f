"""Kolibri-1.1: Kolibri-1's block (GLM-4's post-sublayer norms, its sigmoid mixture), with sparse attention and
keys and values shared across layers.

Every block returns ``(stream, index_pool)``: the pool of candidate keys its
indexer chose, which the following indexed-attention blocks rescore until the
next indexer chooses anew. A skipped block hands on the pool it was called
with (``CarryingLayer``, as GLM-MoE-DSA's top-k indices).

An indexed-attention block (no RoPE) selects, per query, the ``index_topk``
keys of its pool that the ReLU of its first heads' logits scores highest,
plus sink and local tokens, by overlaying the selection on the mask it hands
the attention interface; its keys and values pass through an NVFP4 rounding
(straight-through) before the interface. The scores and the pattern are the
interface's, so the queries and keys are read where it takes them: the keys
as rounded, the mask as selected. The first ``mlp_only_layers`` blocks have a
dense MLP (their routing values say so).

An indexed-attention block may read the keys and values another block's
attention computed (``kv_source_layers``): that block stores them beside the
stream for the later one, so skipping it breaks the later one, and the later
one's gradient reaches its input by that way too.
"""

from typing import ClassVar

from nnterp import TinyConfig

from . import kolibri1
from .glm_moe_dsa import CarryingLayer

KV_STORED = "its attention stores the keys and values a later indexed-attention block reads (kv_source_layers), so that block finds none when it is skipped"
KV_READ = "a later indexed-attention block reads the keys and values this block's attention computes from its input (kv_source_layers)"


class SharingKeysLayer(CarryingLayer):
    """A block returning ``(stream, index_pool)`` whose attention may store keys and values a later block reads."""

    carried: ClassVar[tuple[str, int]] = ("index_pool", 7)

    def stores_shared_keys(self) -> bool:
        """Whether a later block reads the keys and values this block's attention computes."""
        return bool(getattr(self._module.self_attn, "store_full_length_kv", False))

    def skip_breaks(self) -> str | None:
        return KV_STORED if self.stores_shared_keys() else None

    def read_beside_the_stream(self) -> str | None:
        return KV_READ if self.stores_shared_keys() else None


#: a dense sliding block, an indexer, a sliding block and a reindexer that reads the indexer's keys and values; a
#: selection that bites on the kit's prompts (budget of five keys a query, pools of four)
LAYERS = {
    "num_hidden_layers": 4,
    "layer_types": ["sliding_attention", "indexed_attention"] * 2,
    "index_layers": [1],
    "kv_source_layers": [0, 1, 2, 1],
    "mlp_only_layers": [0],
    "mlp_only_intermediate_size": 64,
    "sliding_window": 4,
    "index_num_heads": 2,
    "index_topk": 2,
    "index_pool_size": 4,
    "index_compression": 2,
    "index_num_local_tokens": 2,
    "index_num_sink_tokens": 1,
}

FAMILY = kolibri1.FAMILY.replace(
    name="kolibri1_1",
    model_types=("kolibri1_1",),
    envoys={**kolibri1.FAMILY.envoys, "layers.*": SharingKeysLayer},
    tiny={"kolibri1_1": TinyConfig("kolibri1_1", LAYERS)},
)
