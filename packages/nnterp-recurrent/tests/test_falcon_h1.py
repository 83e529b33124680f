"""Falcon-H1: a parallel block of a Mamba-2 mixer and softmax attention under muP multipliers, and y before the gate on decode steps."""

import nnsight
import pytest
import torch
from nnterp_conformance.checks import verdict
from nnterp_recurrent.components.mixer import RecurrentMixer
from nnterp_recurrent.families import falcon_h1

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
#: without the gated norm the forward multiplies y by silu(z) after the kernel; with it, the norm gates it
CHECKPOINTS = ("falcon_h1", "falcon_h1-rmsnorm")
STEPS = 3


def _decoded_and_whole(model, layer=1):
    """Each generate step's head outputs, joined, and one trace's over the same tokens."""
    ids = model.tokenizer(PROMPTS[0])["input_ids"]
    with torch.no_grad(), model.generate(torch.tensor([ids]), max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer:
        steps = nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            steps.append(model.layers[layer].linear_attn.attention_head_outputs.detach().clone())
        tokens = tracer.result.save()
    every = tokens[0].tolist()[: len(ids) + STEPS - 1]
    with torch.no_grad(), model.trace(torch.tensor([every])):
        whole = model.layers[layer].linear_attn.attention_head_outputs.detach().clone().save()
    return torch.cat(list(steps), dim=1), whole


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_decode_steps_read_y_before_the_gate(tiny_model, name):
    decoded, whole = _decoded_and_whole(tiny_model(name))
    assert decoded.shape == whole.shape
    torch.testing.assert_close(decoded, whole, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_zeroed_y_on_a_decode_step_silences_the_mixer(tiny_model, name):
    model = tiny_model(name)
    with torch.no_grad(), model.generate(PROMPTS[0], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        outputs = nnsight.save([])
        for _ in tracer.iter[:2]:
            mixer = model.layers[0].linear_attn
            mixer.attention_head_outputs = torch.zeros_like(mixer.attention_head_outputs)
            outputs.append(mixer.attention_output.detach().clone())
    assert all(output.abs().max() == 0 for output in outputs)


def test_y_on_a_decode_step_needs_no_torch_update(tiny_model, monkeypatch):
    # the decode update takes no gate z (the forward applies it after, as on a prompt): y is the update's output,
    # whatever the kernels are routed to
    model = tiny_model("falcon_h1")
    monkeypatch.setattr(falcon_h1.FalconH1Mixer, "routing", lambda self: "default")
    assert model.layers[0].linear_attn.support()["attention_head_outputs"] is None
    decoded, whole = _decoded_and_whole(model)
    torch.testing.assert_close(decoded, whole, rtol=0, atol=1e-5)


def test_unscaled_mixer_output_fails_the_block_identity(tiny_model, monkeypatch):
    model = tiny_model("falcon_h1")
    assert verdict("contribution", model, PROMPTS).status == "pass"
    # the module's own output, without the ssm_out_multiplier the block applies
    monkeypatch.setattr(falcon_h1.FalconH1Mixer, "attention_output", RecurrentMixer.attention_output)
    assert verdict("contribution", model, PROMPTS).status == "fail"
