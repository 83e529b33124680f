"""Sigmoid and grouped routers (DeepSeek-V3's and its relatives, DeepSeek-V2's softmax groups): the kit's identities on each."""

import torch

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_laguna_routed_output_is_what_the_block_adds(tiny_model):
    model = tiny_model("laguna-scaled")
    mlp = model.layers[1].mlp
    scale = mlp._module.routed_scaling_factor
    assert scale != 1
    with torch.no_grad(), model.trace(PROMPTS):
        experts = mlp.experts.output.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPTS):
        routed = mlp.routed_output.detach().clone().save()
    torch.testing.assert_close(routed, (experts * scale).view(routed.shape))


def test_laguna_router_logits_are_what_the_sigmoid_takes(tiny_model):
    model = tiny_model("laguna-scaled")
    mlp = model.layers[1].mlp
    cap = mlp.router._module.router_logit_softcapping
    assert cap > 0
    with torch.no_grad(), model.trace(PROMPTS):
        logits = mlp.router_logits.detach().clone().save()
    assert logits.abs().max() <= cap


def test_hy_v3_chooses_by_the_blocks_bias(tiny_model):
    model = tiny_model("hy_v3")
    mlp = model.layers[1].mlp
    assert mlp.selection_bias() is mlp._module.e_score_correction_bias
    assert mlp.scaling() == mlp.router._module.router_scaling_factor != 1


def test_minicpm5_moe_heads_are_gated_before_the_projection(tiny_model, monkeypatch):
    from nnterp import Attention
    from nnterp_conformance.checks import verdict

    model = tiny_model("minicpm5_moe")
    attention = model.layers[1].self_attn
    heads, width = attention.num_heads, attention.head_dim
    with torch.no_grad(), model.trace(PROMPTS):
        normed = model.layers[1].attention_norm_output.detach().clone().save()
        ungated = attention.ungated_head_outputs.detach().clone().save()
        gated = attention.attention_head_outputs.detach().clone().save()
    # q_gate_proj lays each head's query and gate side by side: the gate is the second half of each head's slice
    gate = attention.q_gate_proj._module(normed).unflatten(-1, (heads, 2 * width))[..., width:]
    torch.testing.assert_close(gated, ungated * gate.sigmoid())
    # the heads read where the interface returns them, as a plain attention reads them, are not what o_proj takes
    value = Attention.attention_head_outputs.at()
    value.__set_name__(type(attention), "attention_head_outputs")
    monkeypatch.setattr(type(attention), "attention_head_outputs", value)
    assert verdict("head_outputs_make_the_projection", model, PROMPTS).status == "fail"


def test_minicpm5_moe_router_scales_the_renormalized_weights(tiny_model):
    model = tiny_model("minicpm5_moe")
    mlp = model.layers[1].mlp
    assert mlp.scaling() == mlp.router._module.routed_scaling_factor != 1
    assert mlp.router._module.num_group > 1  # the tiny's groups bite
    with torch.no_grad(), model.trace(PROMPTS):
        weights = mlp.expert_weights.detach().clone().save()
    torch.testing.assert_close(weights.sum(-1), torch.full(weights.shape[:-1], mlp.scaling()))
