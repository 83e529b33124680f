"""Mixtral: OLMoE's mixture, its router renormalizing the top-k probabilities whatever the config says."""

from nnterp import Moe

from .olmoe import ENVOYS as OLMOE
from .olmoe import RENAME  # noqa: F401 - the same names


class MixtralMoe(Moe):
    NORMALIZE = True


ENVOYS = {**OLMOE, "layers.*.mlp": MixtralMoe}
