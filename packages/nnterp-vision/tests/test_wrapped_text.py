"""Wrappers whose text model is served before their tower: the text kit passes on text prompts, and nothing claims a tower."""

import pytest
from nnterp_conformance.runner import PROMPTS, assert_conforms

#: Gemma 4 multiplies the whole stream by its per-layer layer_scalar after the MLP: no tensor is what the MLP adds
SCALED_STREAM = {"contribution", "contribution_at_every_step"}
SKIPS = {"gemma4": SCALED_STREAM, "gemma4_unified": SCALED_STREAM, "got_ocr2": set()}


@pytest.mark.parametrize("name", sorted(SKIPS))
def test_the_text_model_passes_the_kit(tiny_model, name):
    model = tiny_model(name)
    assert_conforms(model, PROMPTS, SKIPS[name])
    # the tower is not mapped yet: no model.vision pretends to serve it
    assert "vision" not in model.__dict__
