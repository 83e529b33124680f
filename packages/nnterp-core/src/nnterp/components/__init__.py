"""The base components a family's envoys subclass."""

from .attention import INTERFACE, INTERIOR, Attention, GatedAttention, each_interior, interface_reason, needs_eager, seq_first
from .layer import Layer
from .mlp import Mlp
from .moe import Moe, mixture_reason, needs_grouped_experts, no_shared_expert
from .sandwich import PostNormAttention, PostNormMlp, SandwichLayer
from .variants import ParallelLayer, PostNormLayer
from .standard import Standard, blocks_support, first_tensor, rewrap

__all__ = [
    "INTERFACE",
    "INTERIOR",
    "Attention",
    "GatedAttention",
    "Layer",
    "Mlp",
    "Moe",
    "ParallelLayer",
    "PostNormAttention",
    "PostNormLayer",
    "PostNormMlp",
    "SandwichLayer",
    "Standard",
    "blocks_support",
    "each_interior",
    "first_tensor",
    "interface_reason",
    "mixture_reason",
    "needs_eager",
    "needs_grouped_experts",
    "no_shared_expert",
    "rewrap",
    "seq_first",
]
