"""Granite-MoE-Hybrid: Granite-MoE-Shared's scaled block with a Mamba-2 mixer (``mamba``, served as ``linear_attn``) on most blocks.

Each block holds one mixer or the other (``config.layer_types``): ``mamba``,
a ``StateSpace``, or ``self_attn``; the module of the other kind is None. The
block adds each sublayer's output times ``residual_multiplier``, so the
mixer's ``attention_output`` is served scaled, as the attention's is. The
mixer's chunk size is ``config.mamba_chunk_size``.
"""

from nnterp_text.families import granitemoeshared
from nnterp_text.families.granite import residual_multiplier
from nnterp_text.families.granitemoeshared import project_on_vocab  # noqa: F401 - the family's logits

from ..components.mixer import RecurrentMixer
from ..components.state_space import StateSpace

#: the transformers modules whose kernels route_kernels binds
MODELING = ("transformers.models.granitemoehybrid.modeling_granitemoehybrid",)


class GraniteMixer(StateSpace):
    """The Mamba-2 mixer of a Granite block: its contribution scaled by ``residual_multiplier``."""

    CHUNK_SIZE_FIELD = "mamba_chunk_size"
    attention_output = RecurrentMixer.attention_output.scaled(residual_multiplier)


RENAME = {**granitemoeshared.RENAME, "mamba": "linear_attn"}
ENVOYS = {**granitemoeshared.ENVOYS, "layers.*.linear_attn": GraniteMixer}
