"""nnterp-conformance: tiny checkpoints and the identity checks that prove what standard values mean."""

from .checkpoints import tiny_checkpoint as tiny_checkpoint
