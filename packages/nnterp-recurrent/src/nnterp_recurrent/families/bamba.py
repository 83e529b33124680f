"""Bamba: Llama's block with a Mamba-2 mixer (``mamba``, served as ``linear_attn``) in place of the attention on most blocks.

Each block holds one mixer or the other (``config.layers_block_type``):
``mamba``, a ``StateSpace``, or ``self_attn``, Llama's attention; then
``pre_ff_layernorm`` and ``feed_forward``, a gated MLP. The block returns
``(hidden_states, attention_weights)``. The mixer's chunk size is
``config.mamba_chunk_size``.
"""

from nnterp import Layer
from nnterp.families import default
from nnterp.tiny import TinyConfig

from ..components.state_space import StateSpace
from ..family import RecurrentFamily
from ..tiny import SSD


class BambaLayer(Layer):
    """A Bamba block: returns ``(hidden_states, attention_weights)``."""

    returns_tuple = True


class BambaMixer(StateSpace):
    """Bamba's Mamba-2 mixer: its chunk size is ``config.mamba_chunk_size``."""

    CHUNK_SIZE_FIELD = "mamba_chunk_size"


FAMILY = RecurrentFamily(
    name="bamba",
    model_types=("bamba",),
    modeling=("transformers.models.bamba.modeling_bamba",),
    rename={
        **default.FAMILY.rename,
        "model.final_layernorm": "norm",
        "mamba": "linear_attn",
        "pre_ff_layernorm": "post_attention_layernorm",
        "feed_forward": "mlp",
    },
    envoys={**default.FAMILY.envoys, "layers.*": BambaLayer, "layers.*.linear_attn": BambaMixer},
    tiny={"bamba": TinyConfig("bamba", {**SSD, "attn_layer_indices": [1]})},
    skips={
        "bamba": {
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
