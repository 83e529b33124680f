"""with_envoys: a family's variant keeps everything but the components it swaps."""

from nnterp import Attention, Layer
from nnterp.families import default
from nnterp_conformance.variants import with_envoys


class Swapped(Attention):
    """Another attention component."""


def test_a_variant_swaps_only_the_named_components():
    variant = with_envoys(default, {"layers.*.self_attn": Swapped})
    assert variant.RENAME is default.RENAME
    assert variant.ENVOYS["layers.*.self_attn"] is Swapped
    assert variant.ENVOYS["layers.*"] is Layer
    assert default.ENVOYS["layers.*.self_attn"] is Attention  # the family itself is untouched
    assert variant.__name__ == "broken_default"
