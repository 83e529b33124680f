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
