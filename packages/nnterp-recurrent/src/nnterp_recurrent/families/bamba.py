"""Bamba: Llama's block with a Mamba-2 mixer (``mamba``, served as ``linear_attn``) in place of the attention on most blocks.

Each block holds one mixer or the other (``config.layers_block_type``):
``mamba``, a ``StateSpace``, or ``self_attn``, Llama's attention; then
``pre_ff_layernorm`` and ``feed_forward``, a gated MLP. The block returns
``(hidden_states, attention_weights)``. The mixer's chunk size is
``config.mamba_chunk_size``.
"""

from nnterp import Layer
from nnterp.families import default

from ..components.state_space import StateSpace

#: the transformers modules whose kernels route_kernels binds
MODELING = ("transformers.models.bamba.modeling_bamba",)


class BambaLayer(Layer):
    """A Bamba block: returns ``(hidden_states, attention_weights)``."""

    returns_tuple = True


class BambaMixer(StateSpace):
    """Bamba's Mamba-2 mixer: its chunk size is ``config.mamba_chunk_size``."""

    CHUNK_SIZE_FIELD = "mamba_chunk_size"


RENAME = {
    **default.RENAME,
    "model.final_layernorm": "norm",
    "mamba": "linear_attn",
    "pre_ff_layernorm": "post_attention_layernorm",
    "feed_forward": "mlp",
}
ENVOYS = {**default.ENVOYS, "layers.*": BambaLayer, "layers.*.linear_attn": BambaMixer}
