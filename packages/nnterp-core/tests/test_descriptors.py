"""EProperty's paths, selections, reasons and errors, on the tiny Llama."""

import pytest
import torch
from nnterp import DerivedEProperty, EProperty, Layer, Residual, SourceNotAvailable, Unavailable, unavailable
from nnterp.errors import SourceNotAvailable as NnterpSourceNotAvailable
from nnsight.intervention.source import SourceNotAvailable as NnsightSourceNotAvailable

PROMPT = "Hello world there"


class Probe(Layer):
    """A block with values on every kind of path, for these tests only."""

    @EProperty("../../embed_tokens.output", "The token embeddings, from a block")
    def embeddings(self, value):
        return value

    @EProperty("/norm.input", "The final norm's input, walked from the root")
    def final_stream(self, value):
        return value

    @EProperty("self_attn.source.attention_interface_1.inputs", "The interface's keyword mask", select="scaling")
    def scaling(self, value):
        return value

    @EProperty("self_attn.source.no_such_op_0.output", "An operation the forward does not have")
    def missing_op(self, value):
        return value

    @EProperty("output", "A preprocess with a bug in it", select=0)
    def buggy(self, value):
        return value.no_such_tensor_attribute

    @EProperty("no_such_module.output", "A module the block lacks")
    def absent(self, value):
        return value

    layer_mid = unavailable("no stream between the sublayers on this probe")

    doubled = DerivedEProperty(lambda envoy: envoy.layer_output * 2, "The stream, doubled")


@pytest.fixture(scope="module")
def probe(tiny_model):
    from nnterp import StandardizedTransformer
    from nnterp_conformance import tiny_checkpoint

    from nnterp.families import default

    return StandardizedTransformer(
        tiny_checkpoint("llama"), attn_implementation="eager", envoys={**default.FAMILY.envoys, "layers.*": Probe}
    )


def test_sibling_and_root_paths_reach_the_modules_they_name(probe):
    with torch.no_grad(), probe.trace(PROMPT):
        embeddings = probe.layers[0].embeddings.save()
        native = probe.model.embed_tokens.output.save()
        last = probe.layers[-1].layer_output.save()
        final = probe.layers[0].final_stream.save()
    assert torch.equal(embeddings, native)
    assert torch.equal(final, last)


def test_select_by_name_serves_a_keyword_argument(probe):
    with torch.no_grad(), probe.trace(PROMPT):
        scaling = probe.layers[0].scaling.save()
    attention = probe.layers[0].self_attn
    assert scaling == pytest.approx(attention.head_dim**-0.5)


def test_a_missing_operation_names_the_operations_there_are(probe):
    with pytest.raises(SourceNotAvailable) as raised:
        with probe.trace(PROMPT):
            probe.layers[0].missing_op.save()
    message = str(raised.value)
    assert "no_such_op_0" in message and "attention_interface_1" in message and "self_o_proj_0" in message
    assert isinstance(raised.value, NnsightSourceNotAvailable) and NnterpSourceNotAvailable is SourceNotAvailable


def test_an_attribute_error_in_a_preprocess_surfaces_with_its_own_line(probe):
    with pytest.raises(AttributeError) as raised:
        with probe.trace(PROMPT):
            probe.layers[0].buggy.save()
    assert "no_such_tensor_attribute" in str(raised.value)
    assert "nor its module" not in str(raised.value)
    assert any(entry.name == "buggy" for entry in raised.traceback)


def test_unavailable_raises_before_the_model_runs_and_support_agrees(probe):
    calls = []
    hook = probe._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(Unavailable, match="no stream between the sublayers"):
            with probe.trace(PROMPT):
                probe.layers[1].layer_mid.save()
        with pytest.raises(Unavailable, match="no no_such_module module on this block"):
            with probe.trace(PROMPT):
                probe.layers[1].absent.save()
    finally:
        hook.remove()
    assert calls == []
    support = probe.support()
    assert support["layer_mid"] == {layer: "no stream between the sublayers on this probe" for layer in range(probe.num_layers)}
    assert support["absent"] == {layer: "no no_such_module module on this block" for layer in range(probe.num_layers)}
    with pytest.raises(Unavailable):
        probe.layers[0].layer_mid  # outside a trace as well


def test_a_derived_value_computes_and_refuses_writes(probe):
    with torch.no_grad(), probe.trace(PROMPT):
        doubled = probe.layers[0].doubled.save()
        stream = probe.layers[0].layer_output.save()
    assert torch.equal(doubled, stream * 2)
    with pytest.raises(AttributeError, match="read-only"):
        probe.layers[0].doubled = None


def test_layouts_and_repr_lines_come_from_the_annotations(probe):
    values = type(probe.layers[0]).values()
    assert values["layer_output"].layout is Residual
    assert values["layer_output"].dims == ("batch", "seq", "hidden_size")
    assert values["layer_mid"].layout is Residual  # an unavailable value keeps its base's layout
    attention = type(probe.layers[0].self_attn).values()
    assert attention["attention_probabilities"].dims == ("batch", "num_heads", "query", "key")
    text = repr(probe.layers[0])
    assert "(layer_output) -> Residual [batch seq hidden_size]: The residual stream leaving this block" in text
    assert "(layer_mid): unavailable: no stream between the sublayers on this probe" in text


def test_inside_forward_marks_exactly_the_source_values(probe):
    attention = type(probe.layers[0].self_attn).values()
    inside = {name for name, value in attention.items() if value.inside_forward()}
    assert inside == {
        "attention_queries",
        "attention_keys",
        "attention_values",
        "attention_scores",
        "attention_probabilities",
        "attention_head_outputs",
    }


class _Kept(EProperty):
    """A value class with a field of its own, as a family's (BLOOM's head outputs, vLLM's halves) may have."""

    def __init__(self, *args, extra="kept", **kwargs):
        super().__init__(*args, **kwargs)
        self.extra = extra


def test_evolve_keeps_the_class_its_fields_and_the_layout():
    value = _Kept("output", "A value with its own field", extra="mine", select=0, layout=Residual)
    value.__set_name__(Probe, "kept")
    moved = value.at("self_attn.output", summand=True)
    assert type(moved) is _Kept and moved.extra == "mine"
    assert (moved.key, moved.select, moved.summand, moved.layout) == ("self_attn.output", 0, True, Residual)
    assert (value.key, value.summand) == ("output", False)  # the original is untouched
    assert moved.evolve(extra="other").extra == "other"
    assert moved.name == "kept" and moved.__doc__ == value.__doc__


def test_evolve_names_the_fields_when_one_is_misspelled():
    with pytest.raises(TypeError, match=r"no field slect; fields: .*select"):
        Layer.layer_output.evolve(slect=0)


def test_a_value_moved_onto_another_class_keeps_its_layout_without_its_owner():
    from nnterp.descriptors import redefine, redefining

    class Elsewhere:
        """No base declares these: a moved value's layout comes with it, and an unavailable one has none to inherit."""

    redefine(Elsewhere, layer_output=Layer.layer_output.at("output"), layer_mid=unavailable("none here"))
    assert Elsewhere.layer_output.layout is Residual
    assert Elsewhere.layer_mid.layout is None

    @redefining(("layer_mid",), lambda value: unavailable("moved"))
    class Below(Layer):
        """A value redefined without a layout takes its base's once, when the class is made."""

    assert Below.layer_mid.layout is Residual and Below.layer_mid.reason(None) == "moved"

