"""Blocks built otherwise than the default pre-norm block: parallel, and norms only after the sublayers.

Each is the default block with the boundaries that do not exist marked
unavailable (with the reason) and the others moved to where the block keeps
them; the contribution identity holds on all of them.
"""

from ..descriptors import unavailable
from ..reasons import PARALLEL, POST_NORM_ATTENTION, POST_NORM_MLP
from .layer import Layer
from .sandwich import SandwichLayer


class ParallelLayer(Layer):
    """``x + attn(norm(x)) + mlp(norm'(x))``: both sublayers read the stream entering the block.

    There is no stream between them (``layer_mid``); what the MLP's norm hands
    on is what the MLP is called with, whether the block has one norm (Phi,
    GPT-J, Cohere) or two (GPT-NeoX).
    """

    layer_mid = unavailable(PARALLEL)
    mlp_norm_output = Layer.mlp_norm_output.at("mlp.input")


class PostNormLayer(SandwichLayer):
    """``x + post_norm(attn(x))`` then ``+ post_norm'(mlp(.))``: norms only on the sublayers' outputs (OLMo-2).

    The attention and the MLP read the stream itself, so there is no pre-norm
    output; the stream between the sublayers is what the MLP is called with.
    """

    attention_norm_output = unavailable(POST_NORM_ATTENTION)
    layer_mid = Layer.layer_mid.at("mlp.input")
    mlp_norm_output = unavailable(POST_NORM_MLP)
