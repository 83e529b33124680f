"""The base components a family's envoys subclass."""

from .attention import (
    INTERFACE,
    INTERIOR,
    Attention,
    GatedAttention,
    each_interior,
    interface_reason,
    needs_eager,
    seq_first,
)
from .layer import Layer
from .mixtures import GatedSharedMoe, MixtralMoe, SigmoidMoe, TopKFirstMoe
from .mlp import Mlp
from .moe import Moe, mixture_reason, needs_grouped_experts, no_shared_expert
from .rescaled import RescaledLayer, ScaledOutputLayer
from .sandwich import Glm4Attention, Glm4Mlp, PostNormAttention, PostNormMlp, SandwichLayer
from .scaled import GraniteAttention, GraniteMlp, GraniteMoe, GraniteMoeShared, SharedMlpLayer, residual_multiplier
from .standard import Standard, blocks_support, first_tensor, rewrap
from .streams import StreamLayer, StreamValues
from .variants import ParallelLayer, PostNormLayer

__all__ = [
    "INTERFACE",
    "INTERIOR",
    "Attention",
    "GatedAttention",
    "GatedSharedMoe",
    "Glm4Attention",
    "Glm4Mlp",
    "GraniteAttention",
    "GraniteMlp",
    "GraniteMoe",
    "GraniteMoeShared",
    "Layer",
    "MixtralMoe",
    "Mlp",
    "Moe",
    "ParallelLayer",
    "PostNormAttention",
    "PostNormLayer",
    "PostNormMlp",
    "RescaledLayer",
    "SandwichLayer",
    "ScaledOutputLayer",
    "SharedMlpLayer",
    "SigmoidMoe",
    "Standard",
    "StreamLayer",
    "StreamValues",
    "TopKFirstMoe",
    "blocks_support",
    "each_interior",
    "first_tensor",
    "interface_reason",
    "mixture_reason",
    "needs_eager",
    "needs_grouped_experts",
    "no_shared_expert",
    "residual_multiplier",
    "rewrap",
    "seq_first",
]
