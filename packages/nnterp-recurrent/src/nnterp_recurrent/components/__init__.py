"""The recurrent mixers' components: the shared mechanism and one class per kind of mixer."""

from .lightning import LightningAttention as LightningAttention
from .lightning import blocks_per_token as blocks_per_token
from .linear_attention import LinearAttention as LinearAttention
from .mixer import RecurrentMixer as RecurrentMixer
from .rg_lru import RealGatedLRU as RealGatedLRU
from .selective_scan import SelectiveScan as SelectiveScan
from .short_convolution import ShortConvolution as ShortConvolution
from .state_space import StateSpace as StateSpace
from .state_space import chunk_per_token as chunk_per_token
