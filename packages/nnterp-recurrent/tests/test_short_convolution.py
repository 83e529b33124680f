"""LFM2's gated short convolution: the window's meaning, the window carried into each decode step, and writes that land."""

import nnsight
import pytest
import torch
from nnterp import Unavailable

PROMPT = "The Eiffel Tower is in Paris"


def test_the_window_holds_the_last_conv_inputs(tiny_model):
    model = tiny_model("lfm2")
    mixer = model.layers[0].linear_attn
    size = mixer.kernel_size
    with torch.no_grad(), model.trace(PROMPT):
        B, C = mixer.attention_keys.save(), mixer.attention_queries.save()
        x = mixer.attention_values.save()
        written = mixer.conv_input.save()
        convolved = mixer.conv_output.save()
        left = mixer.state_output.save()
        y = mixer.attention_head_outputs.save()
    assert torch.equal(written, B * x)
    assert torch.equal(left, written[:, -size:])
    assert torch.equal(y, C * convolved)
    # the conv of the last window, as the model's own Conv1d computes it on the last kernel_size inputs
    expected = mixer.conv._module(written[:, -size:].transpose(1, 2))[..., size - 1]
    torch.testing.assert_close(convolved[:, -1], expected)


def test_a_short_prompt_pads_its_window_with_zeros(tiny_model):
    model = tiny_model("lfm3")  # a window of 7, longer than the prompt
    mixer = model.layers[0].linear_attn
    with torch.no_grad(), model.trace("Hi"):
        written = mixer.conv_input.save()
        states = mixer.states.save()
        left = mixer.state_output.save()
    tokens = written.shape[1]
    assert tokens < mixer.kernel_size
    assert torch.equal(states[:, -1], left)
    assert not left[:, : mixer.kernel_size - tokens].any()
    assert torch.equal(left[:, -tokens:], written)


def test_each_decode_step_shifts_the_window_by_its_token(tiny_model):
    model = tiny_model("lfm2")
    mixer = model.layers[2].linear_attn
    with torch.no_grad(), model.generate(PROMPT, max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        steps = nnsight.save([])
        for _ in tracer.iter[:3]:
            written = mixer.conv_input.clone()  # in forward order: B * x, then the window it joins
            started = mixer.state_input
            steps.append((started, written, mixer.state_output.clone()))
    assert steps[0][0] is None
    for (_, _, before), (started, written, left) in zip(steps, steps[1:]):
        assert torch.equal(started, before)
        assert written.shape[1] == 1
        assert torch.equal(left, torch.cat([before[:, 1:], written], dim=1))


def test_a_written_window_is_what_the_next_call_reads(tiny_model):
    model = tiny_model("lfm2")
    mixer = model.layers[0].linear_attn
    with torch.no_grad(), model.trace(PROMPT):
        window = mixer.state_output.clone().save()
        cache = model.output.cache.save()
    with torch.no_grad(), model.trace(" today", cache=cache):
        plain = mixer.attention_head_outputs.save()
    erased = torch.zeros_like(window)
    with torch.no_grad(), model.trace(PROMPT):
        mixer.state_output = erased
        cache = model.output.cache.save()
    with torch.no_grad(), model.trace(" today", cache=cache):
        started = mixer.state_input.save()
        moved = mixer.attention_head_outputs.save()
    assert torch.equal(started, erased)
    assert not torch.equal(moved, plain)


def test_no_decays_betas_or_state_per_token(tiny_model):
    mixer = tiny_model("lfm2").layers[0].linear_attn
    for name in ("decays", "betas"):
        with pytest.raises(Unavailable, match="neither decays its window"):
            getattr(mixer, name)
    with pytest.raises(Unavailable, match="no per-token state"):
        mixer.state
    with pytest.raises(Unavailable, match="no per-token state"):
        mixer.set_state_after(0, None)
