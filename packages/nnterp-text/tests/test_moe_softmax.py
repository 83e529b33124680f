"""Softmax-routed mixtures of experts (and the sigmoid MiniMax ones beside them): the kit's identities on each."""

import pytest
import torch
from nnterp_conformance.runner import assert_conforms

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]

#: every block a mixture of experts: no block has one neuron tensor
MOE = {"neurons_make_contribution"}
#: the checks a model skips, and why: every other check must pass
SKIPS = {
    "olmoe": MOE,
    "mixtral": MOE,
    "qwen3_moe": MOE,
    "mellum": MOE,
    "qwen2_moe": MOE,
    "hunyuan_v1_moe": MOE,
    "ernie4_5_moe": set(),  # block 0 is dense
    "minimax_m2": MOE,
    "minimax_m3_vl_text": MOE,
    "cohere2_moe": {"mid_stream"},  # a parallel block; block 0 is dense
    "aria_text": MOE,
    "phimoe": MOE,
    "flex_olmo": MOE,
}


@pytest.mark.parametrize("name", sorted(SKIPS))
def test_every_check_passes(tiny_model, name):
    assert_conforms(tiny_model(name), PROMPTS, SKIPS[name])


def test_qwen2_moe_shared_expert_output_is_the_gated_product(tiny_model):
    model = tiny_model("qwen2_moe")
    mlp = model.layers[1].mlp
    with torch.no_grad(), model.trace(PROMPTS):
        ungated = mlp.shared_experts.output.detach().clone().save()
        gate = mlp.shared_expert_gate.output.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPTS):
        shared = mlp.shared_expert_output.detach().clone().save()
    torch.testing.assert_close(shared, (torch.sigmoid(gate) * ungated).view(shared.shape))
    with torch.no_grad(), model.trace(PROMPTS):
        routed = mlp.routed_output.detach().clone().save()
        mlp.shared_expert_output = torch.zeros_like(mlp.shared_expert_output)
        output = mlp.mlp_output.detach().clone().save()
    torch.testing.assert_close(output, routed)

