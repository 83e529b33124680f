"""The recurrent mixers' components: the shared mechanism and one class per kind of mixer."""

from .linear_attention import LinearAttention as LinearAttention
from .mixer import RecurrentMixer as RecurrentMixer
