"""Wrappers whose text model is served before their tower: nothing claims a tower (the kit proves the text model)."""

import pytest


@pytest.mark.parametrize("name", ["gemma4", "gemma4_unified", "got_ocr2"])
def test_no_tower_is_claimed(tiny_model, name):
    # the tower is not mapped yet: no model.vision pretends to serve it
    assert "vision" not in tiny_model(name).__dict__
