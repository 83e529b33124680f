"""Softmax-routed mixtures of experts (and the sigmoid MiniMax ones beside them): the kit's identities on each."""

import torch

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


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

