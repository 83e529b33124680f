"""nnterp_recurrent: recurrent mixers (gated DeltaNet, Mamba-1, Mamba-2) and the hybrid families built on them.

Each mixer is reachable as ``layers[i].linear_attn`` whatever its family calls
it, beside ``self_attn`` on a hybrid's attention blocks; its contribution is
``attention_output``, so the block identity holds on both kinds of block.
"""

import nnterp as _nnterp  # noqa: F401 - nnsight before transformers.models

from .calls import per_call as per_call
from .calls import pinned as pinned
from .components import LightningAttention as LightningAttention
from .components import LinearAttention as LinearAttention
from .components import RealGatedLRU as RealGatedLRU
from .components import RecurrentMixer as RecurrentMixer
from .components import SelectiveScan as SelectiveScan
from .components import ShortConvolution as ShortConvolution
from .components import StateSpace as StateSpace
from .components import blocks_per_token as blocks_per_token
from .components import chunk_per_token as chunk_per_token
from .components.selective_scan import needs_token_loop as needs_token_loop
from .components.state_space import needs_per_token_chunks as needs_per_token_chunks
from .family import RecurrentFamily as RecurrentFamily
from .reasons import needs_recurrent_routing as needs_recurrent_routing
from .reasons import needs_torch_kernels as needs_torch_kernels
from .routing import route_delta_rule as route_delta_rule
from .routing import route_kernels as route_kernels
