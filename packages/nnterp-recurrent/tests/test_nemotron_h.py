"""Nemotron-H: every kind of block serves its one sublayer by its standard name, and the kit's identities hold on each."""

import pytest
import torch
from nnterp import Moe, MissingModule, Unavailable
from nnterp_conformance.checks import verdict
from nnterp_recurrent.families.nemotron_h import LATENT, NemotronHMoe

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


#: the tiny checkpoints' blocks, in order: which standard sublayer each holds
KINDS = ["linear_attn", "mlp", "self_attn", "mlp", "linear_attn"]
SUBLAYERS = ("linear_attn", "self_attn", "mlp")


def test_each_block_serves_its_one_sublayer(tiny_model):
    model = tiny_model("nemotron_h")
    assert model.num_layers == len(KINDS)
    for block, kind in zip(model.layers, KINDS):
        assert getattr(block, kind) is block.mixer
        for other in SUBLAYERS:
            if other != kind:
                with pytest.raises(MissingModule):
                    getattr(block, other)
    assert model.layers[1].mlp.no_mixture() is None
    assert "dense" in model.layers[3].mlp.no_mixture()
    assert model.layers[1].mlp.router is model.layers[1].mixer.gate


def test_the_one_norm_feeds_whichever_sublayer(tiny_model):
    model = tiny_model("nemotron_h")
    with torch.no_grad(), model.trace(PROMPTS[0]):
        before_mixer = model.layers[0].attention_norm_output.save()
        normed = model.layers[3].mlp_norm_output.save()
        into = model.layers[3].mlp_input.save()
    assert torch.equal(normed, into)
    assert before_mixer.shape == normed.shape
    with pytest.raises(Unavailable, match="mlp_norm_output"):
        model.layers[3].attention_norm_output
    with pytest.raises(Unavailable, match="attention_norm_output"):
        model.layers[0].mlp_norm_output


def test_latent_slots_are_not_served(tiny_model):
    model = tiny_model("nemotron_h-latent")
    mlp = model.layers[1].mlp
    assert mlp.latent() and mlp.support()["expert_outputs"] == LATENT
    with torch.no_grad(), model.trace(PROMPTS[0]):
        routed = model.layers[1].mlp.routed_output.save()
    assert routed.shape[-1] == model.hidden_size


def test_routed_output_read_in_the_latent_space_fails_the_sum(tiny_model, monkeypatch):
    # the experts' own output is the latent sum, before fc2_latent_proj maps it back to the stream's width
    model = tiny_model("nemotron_h-latent")
    assert verdict("mixture_adds_up", model, PROMPTS).status == "pass"
    monkeypatch.setattr(NemotronHMoe, "routed_output", Moe.routed_output)
    assert verdict("mixture_adds_up", model, PROMPTS).status == "fail"


def test_softmax_scoring_fails_the_routing_check(tiny_model, monkeypatch):
    # the router scores with a sigmoid: a softmax keeps the ranking but not the weights
    model = tiny_model("nemotron_h")
    assert verdict("routing_follows_scoring", model, PROMPTS).status == "pass"
    monkeypatch.setattr(NemotronHMoe, "SCORING", "softmax")
    assert verdict("routing_follows_scoring", model, PROMPTS).status == "fail"
