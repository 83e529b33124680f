"""Ergo (5.25): Beam's rescaled sandwich block on a learned residual gate per channel, and a sigmoid mixture whose
experts end in norms of their own.

The gate adds ``sigmoid(w) * post_norm(out)`` to ``g(w) * stream``: the
contributions are the post norms' outputs times ``sigmoid(w)`` and the
rescalings what ``g(w)`` makes of the stream, each held to the gate module's
own arithmetic; Gemma-2's unscaled contributions are killed by the kit. A
bfloat16 load keeps the embeddings and norms in float32: its comparisons are
judged by the half precision its sublayers compute in.
"""

import pytest
import torch
from nnterp import PostNormAttention, PostNormMlp, Unavailable
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.base import model_dtype
from nnterp_conformance.mutants import Mutant, killed, moved

from nnterp_text.families.ergo import NORMED_ROUTES, ErgoAttention, ErgoMoe

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_the_gate_adds_the_scaled_post_norm_outputs_to_the_rescaled_stream(tiny_model):
    model = tiny_model("ergo")
    for layer in range(model.num_layers):
        block = model.layers[layer]
        with torch.no_grad(), model.trace(PROMPTS):
            stream = block.layer_input.detach().clone().save()
            rescaling = block.layer_input_rescaling.detach().clone().save()
            normed = block.post_attention_layernorm.output.detach().clone().save()
            attention = block.self_attn.attention_output.detach().clone().save()
            mid = block.layer_mid.detach().clone().save()
            mid_rescaling = block.layer_mid_rescaling.detach().clone().save()
            normed_mlp = block.post_feedforward_layernorm.output.detach().clone().save()
            mlp = block.mlp.mlp_output.detach().clone().save()
        attention_gate, mlp_gate = block._module.attention_residual_gate, block._module.feedforward_residual_gate
        with torch.no_grad():
            # the gate module itself: what it adds of a sublayer's output, and what it makes of the stream alone
            torch.testing.assert_close(attention, attention_gate(normed, torch.zeros_like(stream)))
            torch.testing.assert_close(stream + rescaling, attention_gate(torch.zeros_like(normed), stream))
            torch.testing.assert_close(mlp, mlp_gate(normed_mlp, torch.zeros_like(mid)))
            torch.testing.assert_close(mid + mid_rescaling, mlp_gate(torch.zeros_like(normed_mlp), mid))
        assert not torch.allclose(attention, normed)


def test_the_post_norm_outputs_unscaled_are_killed():
    mutant = Mutant(
        "ergo: contributions read at the post norms, without the gate's sigmoid(w)", "ergo",
        {"layers.*.self_attn": moved(ErgoAttention, "the post norm's output as it is",
                                     attention_output=PostNormAttention.attention_output.at()),
         "layers.*.mlp": moved(ErgoMoe, "the post norm's output as it is", mlp_output=PostNormMlp.mlp_output.at())},
        "contribution", "layer_input + attention_output + mlp_output", "Gemma-2's contributions, which Ergo's gate scales",
    )
    found = killed(mutant)
    assert found.status == "fail" and found.detail.startswith("layers["), found


def test_the_routes_are_normed_before_their_weights_so_no_slot_output_is_held(tiny_model):
    model = tiny_model("ergo")
    mixture = model.layers[1].mlp
    assert mixture.support()["expert_outputs"] == NORMED_ROUTES
    assert model.layers[0].mlp.support()["expert_outputs"] != NORMED_ROUTES  # the dense block says it is dense
    with pytest.raises(Unavailable, match="post_expert_norm"), torch.no_grad(), model.trace(PROMPTS):
        mixture.expert_outputs.save()
    with torch.no_grad(), model.trace(PROMPTS):
        routed = mixture.routed_output.detach().clone().save()
        experts = mixture.experts.output.detach().clone().save()
    torch.testing.assert_close(routed.flatten(0, 1), experts)
    assert mixture.normalizes() and mixture.scaling() == mixture.router._module.routed_scaling_factor != 1


def test_a_half_precision_load_is_judged_by_the_precision_its_sublayers_compute_in(tiny_model):
    model = tiny_model("ergo", dtype=torch.bfloat16)
    weights = [parameter.dtype for parameter in model._module.parameters()]
    assert weights[0] == torch.float32 and torch.bfloat16 in weights  # embeddings kept in float32, projections not
    assert model_dtype(model) == torch.bfloat16
    assert verdict("routing_follows_scoring", model, PROMPTS).status == "pass"
