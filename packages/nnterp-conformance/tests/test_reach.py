"""The reasons a model type is out of reach: each names a type transformers has, once, and none names a type a family serves."""

import nnterp  # noqa: F401 - before transformers.models
import pytest
from nnterp.registry import checkpoints, families
from nnterp_conformance.reach import KINDS
from nnterp_conformance.reach_vision import VISION_KINDS
from nnterp_conformance.report import vision_types
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


@pytest.mark.parametrize(("table", "mapping"), [(KINDS, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), (VISION_KINDS, None)], ids=["causal-lm", "vision"])
def test_every_type_is_in_its_mapping_once(table, mapping):
    listed = [model_type for model_types in table.values() for model_type in model_types]
    assert len(listed) == len(set(listed)), sorted({t for t in listed if listed.count(t) > 1})
    known = set(mapping) if mapping is not None else set(vision_types())
    assert not set(listed) - known, sorted(set(listed) - known)


def test_no_causal_lm_reason_names_a_served_type():
    # (a vision type whose text model is served keeps the reason its tower is not: the next test)
    served = set(families())
    stale = {model_type for model_types in KINDS.values() for model_type in model_types} & served
    assert not stale, f"served by a family, yet the table says why it is out of reach: {sorted(stale)}"


def test_no_vision_reason_names_a_type_served_with_its_tower():
    # a type whose family serves a tower has a tiny checkpoint of a vision-language wrapper; its reason must go
    VisionTinyConfig = pytest.importorskip("nnterp_vision.tiny").VisionTinyConfig

    towers = {config.model_type for config in checkpoints().values() if isinstance(config, VisionTinyConfig)}
    stale = {model_type for model_types in VISION_KINDS.values() for model_type in model_types} & towers
    assert not stale, f"served with a tower, yet VISION_KINDS says why not: {sorted(stale)}"
    assert all(model_type in families() for model_type in towers)
