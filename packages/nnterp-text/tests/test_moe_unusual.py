"""Mixtures that are not the standard router + experts shape: the kit's identities on each, and the values each lacks.

GPT-OSS and Granite-MoE (top-k of the logits, then softmax), Granite-MoE's
scaled block with and without a shared MLP beside the mixture, DBRX (a p-norm
of the top-k), JetMoE (experts fed tokens sorted by expert), Llama 4 (every
expert on every token, inputs pre-scaled), ZAYA (a skip expert) and Gemma-4
(the block's experts hosted by its dense MLP).
"""

import pytest
import torch
from nnterp import Unavailable

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]

#: every block a mixture of experts: no block has one neuron tensor
MOE = {"neurons_make_contribution"}
#: expert_outputs unavailable: the experts never hold the slots' outputs side by side
NO_SLOTS = {"rerouted_slot_runs_the_new_expert"}
#: Llama 4's scores scale the experts' inputs: no expert_weights, so no slot to zero (its choices are still checked)
INPUT_SCALED = {"zeroed_slot_leaves_the_sum"} | NO_SLOTS
#: JetMoE's attention experts project their own head outputs (experts.reduce): no o_proj to check them through
NO_O_PROJ = {"head_outputs_make_the_projection"}


def test_granite_moe_values_are_scaled_as_the_block_adds_them(tiny_model):
    model = tiny_model("granitemoeshared")
    mlp = model.layers[1].mlp
    scale = model.layers[1]._module.residual_multiplier
    assert scale != 1
    with torch.no_grad(), model.trace(PROMPTS):
        routed = mlp.routed_output.detach().clone().save()
        experts = mlp.experts.output.detach().clone().save()
        shared = mlp.shared_expert_output.detach().clone().save()
        native = model.layers[1].shared_mlp.output.detach().clone().save()
    torch.testing.assert_close(routed.flatten(0, 1), experts * scale)
    torch.testing.assert_close(shared, native * scale)


def test_granite_without_a_shared_mlp_says_so(tiny_model):
    mlp = tiny_model("granitemoeshared-noshared").layers[0].mlp
    with pytest.raises(Unavailable, match="shared_intermediate_size=0"):
        mlp.shared_expert_output


def test_jetmoe_adds_its_bias_after_the_mixture(tiny_model):
    model = tiny_model("jetmoe")
    mlp = model.layers[0].mlp
    with torch.no_grad(), model.trace(PROMPTS):
        mixture = mlp.mixture_output.detach().clone().save()
        output = mlp.mlp_output.detach().clone().save()
    torch.testing.assert_close(output, mixture + mlp._module.bias.detach())


@pytest.mark.parametrize("name", ["llama4_text", "jetmoe", "dbrx"])
def test_missing_slot_outputs_say_what_to_read_instead(tiny_model, name):
    mlp = tiny_model(name).layers[0].mlp
    with pytest.raises(Unavailable, match="instead|un-sort"):
        mlp.expert_outputs


def test_llama4_written_indices_move_the_score(tiny_model):
    model = tiny_model("llama4_text")
    mlp = model.layers[0].mlp
    with torch.no_grad(), model.trace(PROMPTS):
        indices = mlp.expert_indices.clone()
        indices[..., 0] = (indices[..., 0] + 1) % mlp.num_experts
        indices[..., 1] = (indices[..., 1] + 1) % mlp.num_experts
        mlp.expert_indices = indices
        scores = mlp.router.output[0].detach().clone().save()
        written = indices.save()
    chosen = scores.view(*written.shape[:2], -1) > 0
    assert chosen.gather(-1, written).all()


def test_zaya_skip_expert_is_the_last_router_class(tiny_model):
    mlp = tiny_model("zaya").layers[0].mlp
    assert mlp.num_experts == mlp.router._module.num_experts + 1
    model = tiny_model("zaya")
    with torch.no_grad(), model.trace(PROMPTS):
        indices = mlp.expert_indices.clone()
        indices[:] = mlp.num_experts - 1  # every slot to the skip expert
        mlp.expert_indices = indices
        routed = mlp.routed_output.detach().clone().save()
    assert routed.abs().max() == 0
