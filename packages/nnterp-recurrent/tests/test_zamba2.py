"""Zamba2: Mamba-2 blocks and hybrid blocks whose shared transformer feeds the mixer's input, not the stream."""

import nnsight
import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict
from nnterp_recurrent.families import zamba2

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
#: blocks 0 and 2 are Mamba blocks, 1 and 3 hybrid ones sharing one transformer's weights
HYBRID = (1, 3)


def test_a_hybrid_block_adds_only_its_mixer(tiny_model):
    # the kit's identity leaves the hybrid blocks out, their attention and MLP serving no contribution
    model = tiny_model("zamba2")
    with torch.no_grad(), model.trace(PROMPTS):
        found = nnsight.save([])
        for layer in HYBRID:
            block = model.layers[layer]
            found.append((block.layer_input.clone(), block.linear_attn.attention_output.clone(), block.layer_output.clone()))
    assert len(found) == len(HYBRID)
    for stream, mixer, output in found:
        torch.testing.assert_close(stream + mixer, output, rtol=0, atol=1e-5)


def test_the_shared_transformer_adds_nothing_to_the_stream(tiny_model):
    support = tiny_model("zamba2").support()
    for name, reason in (("self_attn.attention_output", "pre_ff_layernorm"), ("mlp.mlp_output", "linear")):
        assert sorted(support[name]) == [0, 1, 2, 3]
        assert all(reason in support[name][layer] for layer in HYBRID)
    with pytest.raises(Unavailable, match="adds only its Mamba-2 mixer"):
        tiny_model("zamba2").layers[1].self_attn.attention_output
    assert "concat" in support["attention_norm_output"][1] and 0 not in support["attention_norm_output"]


def test_up_half_without_the_adapter_fails_the_neuron_check(tiny_model, monkeypatch):
    model = tiny_model("zamba2")
    assert verdict("neurons_make_contribution", model, PROMPTS).status == "pass"
    # the tied projection's half alone: what the kit would read without the family's up_half
    monkeypatch.setattr(zamba2.Zamba2SharedMlp, "up_half", lambda self: self.gate_up_proj.output.chunk(2, dim=-1)[1])
    assert verdict("neurons_make_contribution", model, PROMPTS).status == "fail"
