"""The last text families: Beam (depth-scaled sandwich), GIT (BERT's post-LN block), LongCat-Flash (two sub-blocks and a shortcut mixture).

Each passes every check but those its unavailable values make skip. Serving a
contribution other than what the block adds (the post norm's output without
Beam's depth scale, LongCat-Flash's layer as one sub-block and its mixture, the
post-LN attention's normalized sum on GIT) breaks the contribution identity,
and the kit names the block.
"""

import torch
from nnterp import Attention, Mlp, Moe
from nnterp_conformance.checks import verdict

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def _serve(monkeypatch, component, name, value):
    value.__set_name__(component, name)
    monkeypatch.setattr(component, name, value)


def _fails_naming_a_block(model):
    result = verdict("contribution", model, PROMPTS)
    assert result.status == "fail", result
    assert result.detail.startswith("layers["), result


def test_beam_contributions_are_the_post_norm_outputs_divided_by_sqrt_k(tiny_model, monkeypatch):
    model = tiny_model("beam")
    for layer in range(model.num_layers):
        block = model.layers[layer]
        with torch.no_grad(), model.trace(PROMPTS):
            attention = block.self_attn.attention_output.detach().clone().save()
            normed = block.post_attention_layernorm.output.detach().clone().save()
            mlp = block.mlp.mlp_output.detach().clone().save()
            normed_mlp = block.post_feedforward_layernorm.output.detach().clone().save()
        torch.testing.assert_close(attention, normed / (2 * (layer + 1)) ** 0.5)
        torch.testing.assert_close(mlp, normed_mlp / (2 * (layer + 1) + 1) ** 0.5)
    # Gemma-2's contributions: right on a sandwich block that adds them as they are, wrong under Beam's depth scaling
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


def test_longcat_layer_adds_both_sub_blocks_and_the_shortcut(tiny_model, monkeypatch):
    model = tiny_model("longcat_flash")
    block = model.layers[0]
    assert block.self_attn.o_proj is block.self_attn[0].o_proj
    assert block.self_attn.num_heads == block.self_attn[0]._module.num_heads
    terms = block.contributions()
    with torch.no_grad(), model.trace(PROMPTS):
        stream = block.layer_input.detach().clone().save()
        first = block.self_attn[0].output[0].detach().clone().save()
        shortcut = block.mlp.output.detach().clone().save()
        dense = block.mlps[0].output.detach().clone().save()
        second = block.self_attn[1].output[0].detach().clone().save()
        last = block.mlps[1].output.detach().clone().save()
        output = block.layer_output.detach().clone().save()
    torch.testing.assert_close(output, stream + first + shortcut + dense + second + last)
    assert terms == ("self_attn.attention_output", "mlp.mlp_output", "first_mlp_output", "second_attention_output", "second_mlp_output")
    # the first sub-block and the shortcut alone, as a one-sub-block family would read it
    monkeypatch.setattr(type(block), "contributions", lambda self: terms[:2])
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
