"""The Mamba-1 mixer: its values at the scan's kernel call, the state after each token, and the families built on it.

The kit proves the meanings on every registered checkpoint; these tests show
the recurrent checks catch a value pointed at the wrong place, and pin what a
researcher does by hand: walk the states with ``tracer.iter``, write a decode
step's starting state, route the kernels.
"""

import nnsight
import pytest
import torch
from nnterp import DerivedEProperty
from nnterp_conformance.checks import verdict
from nnterp_recurrent import route_kernels
from nnterp_recurrent.components.selective_scan import SelectiveScan

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


@pytest.fixture
def model(tiny_model):
    return tiny_model("mamba")


def _breaks(monkeypatch, model, check, **changes):
    for name, value in changes.items():
        if hasattr(value, "__set_name__"):
            value.__set_name__(SelectiveScan, name)
        monkeypatch.setattr(SelectiveScan, name, value)
    result = verdict(check, model, PROMPTS)
    assert result.status == "fail", result


def test_a_state_output_read_at_the_scan_output_fails(monkeypatch, model):
    # element 0 of the scan's return is y, not the state it hands the cache
    wrong = SelectiveScan.state_output.at(select=lambda e: 0 if not e.decoding() and e.caches() else None)
    _breaks(monkeypatch, model, "states_follow_the_scan", state_output=wrong)


def test_decays_with_the_wrong_sign_fail_the_range_check(monkeypatch, model):
    flipped = DerivedEProperty(lambda self: -SelectiveScan._decays(self), "the log decay, negated")
    _breaks(monkeypatch, model, "gates_in_range", decays=flipped)


def test_betas_before_the_softplus_fail_the_range_check(monkeypatch, model):
    # dt + dt_bias before the softplus: the bias is initialized as softplus^-1 of a small step, so negative
    def raw(self):
        args, kwargs = self.kernel_inputs()
        dt = args[self._position("dt")]
        bias = kwargs[self._position("dt_bias")]
        return (dt + (bias if self.decoding() else bias[..., None])).float().transpose(1, 2)

    _breaks(monkeypatch, model, "gates_in_range", betas=DerivedEProperty(raw, "dt before the softplus"))


def test_a_decode_step_read_at_the_prompt_kernel_fails_continuity(monkeypatch, model):
    _breaks(monkeypatch, model, "state_continues_into_decode", continues=lambda self: False)


def test_a_prompt_taken_to_continue_the_cache_fails_the_split(monkeypatch, model):
    # transformers' scan starts every call of several tokens from zeros: only a decode step continues a cache
    _breaks(monkeypatch, model, "split_prompt_continues", PROMPT_TAKES_STATE=True)


def test_tracer_iter_walks_the_state_after_every_token(model):
    mixer = model.layers[0].linear_attn
    tokens = len(model.tokenizer(PROMPTS[0])["input_ids"])
    with torch.no_grad(), model.trace(PROMPTS[0]) as tracer:
        walked = nnsight.save([])
        for _ in tracer.iter[:tokens]:
            walked.append(mixer.state.clone())
    with torch.no_grad(), model.trace(PROMPTS[0]):
        states = mixer.states.save()
    assert len(walked) == states.shape[1]
    assert torch.equal(torch.stack(walked, 1), states)


def test_values_are_laid_out_tokens_first_on_both_kernels(model):
    mixer = model.layers[1].linear_attn
    tokens = len(model.tokenizer(PROMPTS[0])["input_ids"])
    with torch.no_grad(), model.generate(PROMPTS[0], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        found = nnsight.save([])
        for _ in tracer.iter[:2]:
            found.append(
                (
                    mixer.kernel(),
                    mixer.attention_queries.shape,
                    mixer.attention_values.shape,
                    mixer.decays.shape,
                    mixer.states.shape,
                    mixer.attention_head_outputs.shape,
                )
            )
    channels, width = mixer.channels, mixer.state_dim
    for (kernel, queries, values, decays, states, heads), seq in zip(found, (tokens, 1)):
        assert queries == (1, seq, 1, width) and values == heads == (1, seq, channels)
        assert decays == states == (1, seq, channels, width)
    assert [kernel for kernel, *_ in found] == [SelectiveScan.CHUNK_KERNEL, SelectiveScan.RECURRENT_KERNEL]


def test_a_written_state_input_is_what_the_decode_step_continues_from(model):
    mixer = model.layers[0].linear_attn

    def step(write):
        with torch.no_grad(), model.generate(PROMPTS[0], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
            found = nnsight.save([])
            for index in tracer.iter[:2]:
                if index == 1:
                    if write:
                        mixer.state_input = torch.zeros_like(mixer.state_input)
                    found.append(mixer.betas.clone())
                    found.append(mixer.attention_keys.clone())
                    found.append(mixer.attention_values.clone())
                    found.append(mixer.state_output.clone())
        return found

    betas, keys, values, left = step(write=True)
    _, _, _, unwritten = step(write=False)
    # from a zero state the update is the token's write alone: dt * B * x, per channel and state dimension
    assert torch.allclose(left, (betas[:, 0, :, None] * keys[:, 0, 0, None, :] * values[:, 0, :, None]), atol=1e-6)
    assert not torch.allclose(left, unwritten)


def test_routing_keeps_each_kernel_its_own_pure_function(model):
    mixer = model.layers[0].linear_attn
    module = model.family.modeling[0]
    route_kernels(model.family, "torch")
    try:
        bound = SelectiveScan.torch_kernels(__import__(module, fromlist=["_"]))
        assert bound["mamba_selective_scan"] is not bound["mamba_selective_state_update"]
        assert mixer.routing() == "torch" and mixer.support()["states"] is None
    finally:
        route_kernels(model.family, "default")


def test_a_prompt_takes_no_starting_state(model):
    mixer = model.layers[0].linear_attn
    with pytest.raises(ValueError, match="starts from zeros"):
        with torch.no_grad(), model.trace(PROMPTS[0]):
            mixer.state_input = torch.zeros(1, mixer.channels, mixer.state_dim)


def test_a_token_past_a_decode_steps_one_is_refused_and_releases_the_held_kernel(model):
    from nnterp_recurrent.components.mixer import _held

    mixer = model.layers[1].linear_attn
    with torch.no_grad(), model.generate(PROMPTS[0], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        found = nnsight.save([])
        for step in tracer.iter[:2]:
            if step == 1:
                try:
                    mixer.state_after(1)
                except IndexError as error:
                    found.append((str(error), _held(mixer)))
                found.append(torch.equal(mixer.state_after(0), mixer.state_output))
    (message, held), same = found
    assert "token 1 of a decode step" in message and held is None
    assert same
