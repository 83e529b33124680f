"""Cohere, Cohere2, Cohere2-MoE, Compass: the default names on a one-norm parallel block; logits times ``logit_scale``."""

from nnterp import ParallelLayer
from nnterp.families import default
from nnterp.logits import times_logit_scale as project_on_vocab  # noqa: F401 - the family's logits

RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*": ParallelLayer}
