"""Granite SWA: Granite's scaled block, with sliding windows and a sink that scales each head's output (``ScaledSinkAttention``)."""

from nnterp_text.families.granite import ENVOYS as GRANITE
from nnterp_text.families.granite import RENAME, GraniteAttention, project_on_vocab  # noqa: F401 - the family's logits

from .sinks import ScaledSinkAttention


class GraniteSWAAttention(ScaledSinkAttention, GraniteAttention):
    """The sink-scaled interior, and the contribution scaled by ``residual_multiplier``."""


ENVOYS = {**GRANITE, "layers.*.self_attn": GraniteSWAAttention}
