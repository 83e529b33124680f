"""Mamba-2 (SSD) mixers: the kit's identities on every family, and a meaning broken on purpose that the kit catches."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict
from nnterp_recurrent.components.state_space import StateSpace, chunk_per_token

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_states_need_one_token_chunks(tiny_model):
    model = tiny_model("mamba2")
    mixer = model.layers[0].linear_attn
    assert "chunk_per_token" in mixer.support()["states"]
    built = mixer._module.chunk_size
    chunk_per_token(model)
    try:
        assert mixer._module.chunk_size == 1
        assert mixer.support()["states"] is None
        with torch.no_grad(), model.trace(PROMPTS[0]):
            states = model.layers[0].linear_attn.states.save()
            last = model.layers[0].linear_attn.state_output.save()
        assert torch.allclose(states[:, -1], last)
    finally:
        chunk_per_token(model, enabled=False)
    assert mixer._module.chunk_size == built


def test_no_per_token_state_to_walk_or_write(tiny_model):
    mixer = tiny_model("mamba2").layers[0].linear_attn
    with pytest.raises(Unavailable, match="per-token state"):
        mixer.state
    with pytest.raises(Unavailable, match="per-token state"):
        mixer.set_state_after(0, None)


def test_states_read_a_token_early_fail_the_scan_check(tiny_model, monkeypatch):
    # states_2 is new_states[:, :-1]: the state entering each one-token chunk, a token before the one after it
    model = tiny_model("mamba2")
    assert verdict("states_follow_the_scan", model, PROMPTS).status == "pass"
    monkeypatch.setattr(StateSpace, "CHUNK_STATES", "states_2")
    assert verdict("states_follow_the_scan", model, PROMPTS).status == "fail"
