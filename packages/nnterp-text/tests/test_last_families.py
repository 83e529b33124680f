"""The last text families: Beam (depth-scaled sandwich), GIT (BERT's post-LN block), LongCat-Flash (two sub-blocks and a shortcut mixture).

Each passes every check but those its unavailable values make skip. Serving a
contribution where the block's structure says there is none (the post norm's
output under Beam's depth-scaled add, the first sub-block's attention and the
shortcut mixture on LongCat-Flash, the post-LN attention's normalized sum on
GIT) breaks the contribution identity, and the kit names the block.
"""

import pytest
import torch
from nnterp import Attention, Mlp, Moe, Unavailable
from nnterp_conformance.checks import verdict

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def _serve(monkeypatch, component, name, value):
    value.__set_name__(component, name)
    monkeypatch.setattr(component, name, value)


def _fails_naming_a_block(model):
    result = verdict("contribution", model, PROMPTS)
    assert result.status == "fail", result
    assert result.detail.startswith("layers["), result


def test_beam_post_norm_outputs_are_not_contributions(tiny_model, monkeypatch):
    # Gemma-2's contributions: right on a sandwich block that adds them as they are, wrong under Beam's depth scaling
    model = tiny_model("beam")
    with pytest.raises(Unavailable, match="sqrt"):
        with model.trace(PROMPTS):
            model.layers[0].self_attn.attention_output
    _serve(monkeypatch, type(model.layers[0].self_attn), "attention_output",
           Attention.attention_output.at("../post_attention_layernorm.output", select=None))
    _serve(monkeypatch, type(model.layers[0].mlp), "mlp_output",
           Mlp.mlp_output.at("../post_feedforward_layernorm.output", select=None))
    _fails_naming_a_block(model)


def test_beam_routed_output_includes_the_scaling_applied_after_the_experts(tiny_model, monkeypatch):
    model = tiny_model("beam")
    mixture = next(block.mlp for block in model.layers if block.mlp.no_mixture() is None)
    factor = mixture._module.routed_scaling_factor
    assert factor != 1
    with torch.no_grad(), model.trace(PROMPTS):
        served = mixture.routed_output.detach().clone().save()
        experts = mixture.experts.output.detach().clone().save()
    torch.testing.assert_close(served.flatten(0, 1), experts * factor)
    # the experts' own output, unscaled, is not what the mixture hands on
    _serve(monkeypatch, type(mixture), "routed_output", Moe.routed_output.at())
    assert verdict("mixture_adds_up", model, PROMPTS).status == "fail"


def test_longcat_first_sub_block_and_shortcut_are_not_the_layers_contributions(tiny_model, monkeypatch):
    model = tiny_model("longcat_flash")
    block = model.layers[0]
    assert block.self_attn.o_proj is block.self_attn[0].o_proj
    assert block.self_attn.num_heads == block.self_attn[0]._module.num_heads
    _serve(monkeypatch, type(block.self_attn), "attention_output", Attention.attention_output.at("0.output"))
    _serve(monkeypatch, type(block.mlp), "mlp_output", Mlp.mlp_output.at())
    _fails_naming_a_block(model)


def test_longcat_layer_mid_is_the_stream_after_the_first_attention(tiny_model):
    model = tiny_model("longcat_flash")
    block = model.layers[1]
    with torch.no_grad(), model.trace(PROMPTS):
        stream = block.layer_input.detach().clone().save()
        first = block.self_attn[0].output[0].detach().clone().save()
        mid = block.layer_mid.detach().clone().save()
    torch.testing.assert_close(mid, stream + first)


def test_git_normalized_sum_is_not_the_attentions_contribution(tiny_model, monkeypatch):
    # attention.output returns LayerNorm(dense(context) + layer_input): a stream, not what the attention adds
    model = tiny_model("git")
    assert model.lm_head is model.E_output
    _serve(monkeypatch, type(model.layers[0].self_attn), "attention_output",
           Attention.attention_output.at("E_output.output", select=None))
    _serve(monkeypatch, type(model.layers[0].mlp), "mlp_output", Mlp.mlp_output.at("../E_output.output", select=None))
    _fails_naming_a_block(model)
