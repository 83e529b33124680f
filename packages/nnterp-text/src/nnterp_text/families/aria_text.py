"""Aria's text model: OLMoE's mixture under its own ``router``, which softmaxes the top-k logits; ``shared_experts`` beside."""

from nnterp import Moe
from nnterp.families import default

RENAME = default.RENAME


class AriaMoe(Moe):
    LOGITS = "router.source.nn_functional_linear_0"
    TOPK_FIRST = True


ENVOYS = {**default.ENVOYS, "layers.*.mlp": AriaMoe}
