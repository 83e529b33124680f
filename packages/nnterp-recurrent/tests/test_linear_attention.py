"""The gated DeltaNet mixer: its values at the kernel call, the state after each token, routing, and hybrids' blocks.

The kit proves the meanings on every registered checkpoint (test_kit.py); these
tests show the recurrent checks catch a value pointed at the wrong place, and
pin what a researcher does by hand: walk the states with ``tracer.iter``, route
and restore, read a mixer a block does not have.
"""

import nnsight
import pytest
import torch
from nnterp import MissingModule, Unavailable
from nnterp_conformance.checks import verdict
from nnterp_recurrent import LinearAttention, route_delta_rule, route_kernels

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


@pytest.fixture
def model(tiny_model):
    return tiny_model("qwen3_next")


@pytest.fixture
def routed(model):
    route_kernels(model.family, "torch")
    yield model
    route_kernels(model.family, "default")


def _breaks(monkeypatch, model, check, **changes):
    for name, value in changes.items():
        if hasattr(value, "__set_name__"):
            value.__set_name__(LinearAttention, name)
        monkeypatch.setattr(LinearAttention, name, value)
    result = verdict(check, model, PROMPTS)
    assert result.status == "fail", result


def test_a_state_read_before_the_write_fails_the_scan_check(monkeypatch, model):
    # last_recurrent_state_2 is the decayed state, before the token's key/value is written
    _breaks(monkeypatch, model, "states_follow_the_scan", STATE_OP="last_recurrent_state_2")


def test_a_state_output_read_at_the_head_outputs_fails(monkeypatch, model):
    _breaks(monkeypatch, model, "states_follow_the_scan", state_output=LinearAttention.attention_head_outputs.at(select=0))


def test_betas_served_as_decays_fail_the_range_check(monkeypatch, model):
    _breaks(monkeypatch, model, "gates_in_range", decays=LinearAttention.decays.at(select="beta"))


def test_a_decode_step_read_at_the_prompt_kernel_fails_continuity(monkeypatch, model):
    # read at the prompt's kernel, the decode step's value is never reached: nnsight says so, and the check fails
    with pytest.warns(UserWarning, match="was never reached"):
        _breaks(monkeypatch, model, "state_continues_into_decode", continues=lambda self: False)


def test_the_state_after_each_token_needs_routing(model):
    mixer = model.layers[0].linear_attn
    route_kernels(model.family, "default")
    reason = mixer.support()["states"]
    assert "route_kernels" in reason
    with pytest.raises(Unavailable, match="route_kernels"):
        with model.trace(PROMPTS[0]):
            mixer.states


def test_routing_reaches_a_forward_already_instrumented(model):
    mixer = model.layers[0].linear_attn
    with torch.no_grad(), model.trace(PROMPTS[0]):
        chunked = mixer.state_output.save()  # instruments the forward with the default kernels
    route_delta_rule(model.family, "recurrent")
    try:
        assert mixer.routing() == "torch" and mixer.support()["states"] is None
        with torch.no_grad(), model.trace(PROMPTS[0]):
            states = mixer.states.save()
    finally:
        route_delta_rule(model.family, "chunked")
    assert mixer.routing() == "default"
    assert torch.allclose(states[:, -1], chunked, atol=1e-6)


def test_tracer_iter_walks_the_state_after_every_token(routed):
    mixer = routed.layers[0].linear_attn
    tokens = len(routed.tokenizer(PROMPTS[0])["input_ids"])
    with torch.no_grad(), routed.trace(PROMPTS[0]) as tracer:
        walked = nnsight.save([])
        for _ in tracer.iter[:tokens]:
            walked.append(mixer.state.clone())
    with torch.no_grad(), routed.trace(PROMPTS[0]):
        states = mixer.states.save()
    assert len(walked) == states.shape[1]
    assert torch.equal(torch.stack(walked, 1), states)


def test_a_decode_step_runs_the_token_by_token_kernel(model):
    mixer = model.layers[0].linear_attn
    with torch.no_grad(), model.generate(PROMPTS[0], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        kernels = nnsight.save([])
        for _ in tracer.iter[:2]:
            kernels.append(mixer.kernel())
    assert kernels == [LinearAttention.CHUNK_KERNEL, LinearAttention.RECURRENT_KERNEL]


def test_a_mixer_the_block_lacks_says_so(model):
    assert not hasattr(model.layers[1], "linear_attn")
    with pytest.raises(MissingModule, match="no linear_attn module on this block"):
        model.layers[1].linear_attn


def test_routing_takes_a_family_or_a_modeling_module(model):
    with pytest.raises(ValueError, match="'torch', 'default'"):
        route_kernels(model.family, "fast")
    with pytest.raises(TypeError, match="pass model.family"):
        route_kernels(torch, "torch")


def test_kimi_delta_blocks_go_by_linear_attn_alone(tiny_model):
    # the model calls both mixers self_attn; a delta block's is linear_attn, and has no self_attn
    model = tiny_model("kimi_linear")
    delta, softmax = model.layers[0], model.layers[1]
    assert type(delta.linear_attn).__name__ == "KimiDeltaAttention"
    with pytest.raises(MissingModule, match="no self_attn module"):
        delta.self_attn
    assert not hasattr(softmax, "linear_attn")
    support = model.support()
    assert support["self_attn.attention_probabilities"][0] == "no self_attn module on this block"
    assert support["linear_attn.decays"] == {1: "no linear_attn module on this block"}


def test_kimi_decays_are_per_key_channel(tiny_model):
    model = tiny_model("kimi_linear")
    mixer = model.layers[0].linear_attn
    with torch.no_grad(), model.trace(PROMPTS[1]):
        decays = mixer.decays.save()
    assert decays.shape[2:] == (mixer.num_heads, mixer.key_dim)
    assert (decays <= 0).all()
