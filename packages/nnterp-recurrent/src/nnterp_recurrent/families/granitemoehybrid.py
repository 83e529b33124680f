"""Granite-MoE-Hybrid: Granite-MoE-Shared's scaled block with a Mamba-2 mixer (``mamba``, served as ``linear_attn``) on most blocks.

Each block holds one mixer or the other (``config.layer_types``): ``mamba``,
a ``StateSpace``, or ``self_attn``; the module of the other kind is None. The
block adds each sublayer's output times ``residual_multiplier``, so the
mixer's ``attention_output`` is served scaled, as the attention's is. The
mixer's chunk size is ``config.mamba_chunk_size``.
"""

from nnterp import GraniteAttention, GraniteMoeShared, SharedMlpLayer, residual_multiplier
from nnterp.families import default
from nnterp.logits import divided_by_logits_scaling
from nnterp.tiny import TinyConfig

from ..components.mixer import RecurrentMixer
from ..components.state_space import StateSpace
from ..family import RecurrentFamily
from ..tiny import SSD


class GraniteMixer(StateSpace):
    """The Mamba-2 mixer of a Granite block: its contribution scaled by ``residual_multiplier``."""

    CHUNK_SIZE_FIELD = "mamba_chunk_size"
    attention_output = RecurrentMixer.attention_output.scaled(residual_multiplier)


FAMILY = RecurrentFamily(
    name="granitemoehybrid",
    model_types=("granitemoehybrid",),
    modeling=("transformers.models.granitemoehybrid.modeling_granitemoehybrid",),
    # Granite-MoE-Shared's block: its mixture at block_sparse_moe
    rename={**default.FAMILY.rename, "block_sparse_moe": "mlp", "mamba": "linear_attn"},
    envoys={
        **default.FAMILY.envoys,
        "layers.*": SharedMlpLayer,
        "layers.*.self_attn": GraniteAttention,
        "layers.*.mlp": GraniteMoeShared,
        "layers.*.linear_attn": GraniteMixer,
    },
    project_on_vocab=divided_by_logits_scaling,
    tiny={
        "granitemoehybrid": TinyConfig(
            "granitemoehybrid",
            {
                **SSD,
                "layer_types": ["linear_attention", "attention"],
                "shared_intermediate_size": 32,
                "residual_multiplier": 0.5,
            },
        ),
    },
    skips={
        "granitemoehybrid": {
            "neurons_make_contribution": "a mixture of experts",
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
