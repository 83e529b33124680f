"""Family: one frozen, typed object per family; a sibling is a diff; a wrapper takes its text family by model type."""

import dataclasses

import pytest
from nnterp import Attention, Family, FamilyNotFound, Mlp, TinyConfig
from nnterp.families import default
from nnterp.family import ROOT_NAMES, as_family
from nnterp.registry import Catalog, catalog, family_for, family_named


class OtherMlp(Mlp):
    pass


def _head(model, hidden):
    return hidden


def test_an_unknown_field_is_a_type_error_where_the_family_is_written():
    with pytest.raises(TypeError, match="RENAME"):
        Family(name="x", RENAME={})
    with pytest.raises(TypeError, match="has no field 'ENVOYS'; its fields: name, model_types"):
        default.FAMILY.replace(ENVOYS={})


def test_a_family_is_frozen_down_to_its_tables():
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.FAMILY.rename = {}
    with pytest.raises(TypeError):
        default.FAMILY.rename["model.layers"] = "blocks"
    assert isinstance(default.FAMILY.model_types, tuple)


def test_a_sibling_is_a_diff_and_serves_only_its_own_types():
    sibling = default.FAMILY.replace(name="sibling", envoys={**default.FAMILY.envoys, "layers.*.mlp": OtherMlp}, project_on_vocab=_head)
    assert sibling.rename == default.FAMILY.rename and sibling.envoys["layers.*.self_attn"] is Attention
    assert sibling.envoys["layers.*.mlp"] is OtherMlp and sibling.project_on_vocab is _head
    assert (sibling.model_types, sibling.model_classes, dict(sibling.tiny)) == ((), (), {})
    assert default.FAMILY.envoys["layers.*.mlp"] is Mlp and default.FAMILY.model_types  # the relative is untouched


def test_a_family_without_a_final_norm_says_why_and_names_no_norm():
    post_ln = default.FAMILY.replace(name="post_ln", no_final_norm="a post-LN model")
    assert post_ln.root_names == tuple(name for name in ROOT_NAMES if name != "norm")
    assert default.FAMILY.root_names == ROOT_NAMES


@pytest.fixture
def with_text(monkeypatch):
    """A registry that also holds a text family ``text_x``, and a wrapper of it."""
    from nnterp import registry

    text = default.FAMILY.replace(
        name="text_x", model_types=("text_x",), rename={**default.FAMILY.rename, "feed": "mlp"}, project_on_vocab=_head
    )
    monkeypatch.setattr(registry, "family_for", lambda model_type: {"text_x": text}[model_type])
    wrapper = Family(
        name="wrapper_x",
        model_types=("wrapper_x",),
        text_family="text_x",
        rename={"model.language_model.layers": "layers", "model.language_model.norm": "norm"},
        envoys={"layers.*.mlp": OtherMlp},
    )
    return text, wrapper


def test_a_wrapper_takes_its_text_familys_block_names_components_and_hooks(with_text):
    text, wrapper = with_text
    merged = wrapper.with_text_family()
    # the text family's root names are the wrapper's to place; its block names come along
    assert dict(merged.rename) == {"feed": "mlp", "model.language_model.layers": "layers", "model.language_model.norm": "norm"}
    # the wrapper's components first (nnsight takes the first match), then the text family's
    assert list(merged.envoys) == ["layers.*.mlp", "layers.*", "layers.*.self_attn"] and merged.envoys["layers.*.mlp"] is OtherMlp
    assert merged.project_on_vocab is _head and merged.model_types == ("wrapper_x",) and merged.text_family == "text_x"
    assert dict(merged.with_text_family().rename) == dict(merged.rename)  # merging twice changes nothing


def test_a_wrapper_keeps_its_own_hooks(with_text):
    _, wrapper = with_text
    own = wrapper.replace(project_on_vocab=print).with_text_family()
    assert own.project_on_vocab is print


def test_family_argument_takes_a_family_a_module_or_its_path():
    assert as_family(default.FAMILY) is default.FAMILY
    assert as_family(default) is default.FAMILY
    assert as_family("nnterp.families.default") is default.FAMILY
    with pytest.raises(TypeError, match="takes an nnterp Family"):
        as_family({"rename": {}})


def test_the_registry_finds_a_family_by_type_and_by_name():
    assert family_for("llama") is default.FAMILY and family_named("default") is default.FAMILY
    with pytest.raises(FamilyNotFound, match="no installed family is called 'nope'; installed: "):
        family_named("nope")


def test_the_catalog_indexes_every_field_a_family_declares():
    family = Family(name="x", model_types=("a", "b"), model_classes=("XForCausalLM",), tiny={"x-small": TinyConfig("a")})
    index = Catalog.of([family], {"x": "pkg.families.x"})
    assert index.modules == {"x": "pkg.families.x"} and index.model_types == {"a": "x", "b": "x"}
    assert index.model_classes == {"XForCausalLM": "x"} and index.checkpoints == {"x-small": ("x", "a")}
    assert catalog().model_types["llama"] == "default"


@pytest.mark.parametrize("field", ["skips", "half_precision_failures"])
def test_a_declaration_for_a_checkpoint_the_family_lacks_is_refused(field):
    with pytest.raises(ValueError, match=f"declares {field} for elsewhere, which are not among its tiny checkpoints"):
        Family(name="stray", **{field: {"elsewhere": {"contribution": "why"}}})


def test_a_sibling_declares_its_own_half_precision_failures():
    with_failures = default.FAMILY.replace(name="x", tiny={"x": TinyConfig("llama")}, half_precision_failures={"x": {"contribution": "why"}})
    assert with_failures.replace(name="y").half_precision_failures == {}
