"""Sigmoid and grouped routers (DeepSeek-V3's and its relatives, DeepSeek-V2's softmax groups): the kit's identities on each."""

import pytest
import torch
from nnterp_conformance.runner import assert_conforms

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]

#: every block a mixture of experts: no block has one neuron tensor
MOE = {"neurons_make_contribution"}
#: the checks a model skips, and why: every other check must pass (the others have a dense first block)
SKIPS = {
    "deepseek_v2": set(),
    "deepseek_v2-grouped": set(),  # group_limited_greedy: the best single score picks the groups
    "deepseek_v3": set(),
    "deepseek_v3-grouped": set(),
    "deepseek_v32": set(),
    "dots1": MOE,
    "glm4_moe": set(),
    "glm4_moe_lite": set(),
    "glm_moe_dsa": set(),
    "exaone_moe": set(),
    "solar_open": MOE,
    "axk2": set(),
    "axk2-grouped": set(),  # grouped routing, dropped groups filled with 0
    "mimo_v2_flash": set(),  # no shared expert: mixture_adds_up compares routed_output alone
    "dots3_note_text": set(),
    "hy_v3": set(),
    "laguna": set(),
    "laguna-scaled": set(),  # softcapped router logits, routed sum scaled by the block
}


@pytest.mark.parametrize("name", sorted(SKIPS))
def test_every_check_passes(tiny_model, name):
    assert_conforms(tiny_model(name), PROMPTS, SKIPS[name])


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
