"""with_envoys: a family's variant keeps everything but the components it swaps."""

from nnterp import Attention, Layer
from nnterp.families import default
from nnterp_conformance.variants import with_envoys


class Swapped(Attention):
    """Another attention component."""


def test_a_variant_swaps_only_the_named_components():
    variant = with_envoys(default.FAMILY, {"layers.*.self_attn": Swapped})
    assert variant.rename is default.FAMILY.rename
    assert variant.tiny is default.FAMILY.tiny
    assert variant.envoys["layers.*.self_attn"] is Swapped
    assert variant.envoys["layers.*"] is Layer
    assert default.FAMILY.envoys["layers.*.self_attn"] is Attention  # the family itself is untouched
    assert variant.name == "broken_default"


class PacksTheOtherWay(Layer):
    """A careless family: skip packs its replacement as the other form than the block returns."""

    def returns_a_tuple(self) -> bool:
        return not super().returns_a_tuple()


def test_a_skip_packed_the_other_way_fails_the_skip_check_by_name(tiny_model):
    from nnterp import StandardizedTransformer
    from nnterp_conformance import tiny_checkpoint
    from nnterp_conformance.variants import assert_breaks

    model = tiny_model("llama")
    broken = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager", family=with_envoys(default.FAMILY, {"layers.*": PacksTheOtherWay}))
    assert_breaks("skip_hands_on_hidden", model, broken, "returns a bare tensor, but skip packs its replacement as a tuple")
