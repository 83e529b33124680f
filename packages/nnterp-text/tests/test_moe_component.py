"""The Moe component: where its values live, why they are missing, and that the kit's mixture checks catch a misread."""

import pytest
import torch
from nnterp import Moe, TokenEProperty, Unavailable
from nnterp.components.moe import DENSE
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.runner import run

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_moe_checks_run_on_mixtures_only(tiny_model):
    mixture = {verdict.name for verdict in run(tiny_model("mixtral"))}
    dense = {verdict.name for verdict in run(tiny_model("llama"))}
    moe_checks = {name for name, found in CHECKS.items() if found.kind == "moe"}
    assert len(moe_checks) == 6
    assert moe_checks <= mixture
    assert not moe_checks & dense


def test_values_are_laid_out_per_token(tiny_model):
    model = tiny_model("mixtral")
    mlp = model.layers[1].mlp
    with torch.no_grad(), model.trace(PROMPTS):
        logits = mlp.router_logits.save()
        weights, indices = mlp.expert_weights.save(), mlp.expert_indices.save()
        slots = mlp.expert_outputs.save()
        routed = mlp.routed_output.save()
    batch, seq = logits.shape[:2]
    assert logits.shape == (batch, seq, mlp.num_experts)
    assert weights.shape == indices.shape == (batch, seq, mlp.top_k)
    assert indices.dtype == torch.int64
    assert slots.shape == (batch, seq, mlp.top_k, model.hidden_size)
    assert routed.shape == (batch, seq, model.hidden_size)


def test_dense_blocks_say_why_before_the_run(tiny_model):
    model = tiny_model("deepseek_v3")
    dense, mixture = model.layers[0].mlp, model.layers[1].mlp
    assert dense.no_mixture() == DENSE and mixture.no_mixture() is None
    support = model.support()
    for name in ("router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output", "shared_expert_output"):
        assert support[f"mlp.{name}"] == {0: DENSE}
    with pytest.raises(Unavailable, match="dense"):
        with model.trace(PROMPTS):
            dense.router_logits.save()


def test_eager_experts_say_how_to_load_for_expert_outputs(tiny_model):
    model = tiny_model("mixtral", experts_implementation="eager")
    reason = model.layers[1].mlp.support()["expert_outputs"]
    assert "experts_implementation='grouped_mm'" in reason
    with pytest.raises(Unavailable, match="eager"):
        with model.trace(PROMPTS):
            model.layers[1].mlp.expert_outputs.save()
    # the rest of the mixture still reads and writes under the eager loop
    for name in ("mixture_adds_up", "routing_follows_scoring", "zeroed_slot_leaves_the_sum"):
        assert verdict(name, model, PROMPTS).status == "pass"
    assert verdict("rerouted_slot_runs_the_new_expert", model, PROMPTS).status == "skip"


def test_batched_mm_experts_serve_the_slots_too(tiny_model):
    model = tiny_model("mixtral", experts_implementation="batched_mm")
    for name in ("mixture_adds_up", "zeroed_slot_leaves_the_sum", "rerouted_slot_runs_the_new_expert"):
        assert verdict(name, model, PROMPTS).status == "pass", name


def test_logits_read_after_the_softmax_fail_the_scoring_check(tiny_model, monkeypatch):
    model = tiny_model("mixtral")
    assert verdict("routing_follows_scoring", model, PROMPTS).status == "pass"
    monkeypatch.setattr(type(model.layers[1].mlp), "LOGITS", "router.source.torch_nn_functional_softmax_0")
    failed = verdict("routing_follows_scoring", model, PROMPTS)
    assert failed.status == "fail" and "expert_weights against route" in failed.detail


@pytest.mark.parametrize("ignored", ["groups", "selection_bias"])
def test_grouped_routing_and_selection_bias_both_decide(tiny_model, monkeypatch, ignored):
    model = tiny_model("deepseek_v3-grouped")
    mlp = model.layers[1].mlp
    assert verdict("routing_follows_scoring", model, PROMPTS).status == "pass"
    assert mlp.groups() == (4, 2) and mlp.selection_bias().abs().sum() > 0  # weights are real once a trace ran
    monkeypatch.setattr(type(mlp), ignored, lambda self: None)
    assert verdict("routing_follows_scoring", model, PROMPTS).status == "fail"


def test_a_zero_weight_that_does_not_reach_the_experts_fails(tiny_model, monkeypatch):
    # expert_weights read one position off (the indices) cannot pass the slot check
    model = tiny_model("mixtral")
    monkeypatch.setattr(type(model.layers[1].mlp), "WEIGHTS", 1)
    assert verdict("zeroed_slot_leaves_the_sum", model, PROMPTS).status == "fail"


def test_moved_token_values_stay_token_values():
    moved = Moe.routed_output.at("experts.output")
    assert isinstance(moved, TokenEProperty) and moved.dims == Moe.routed_output.dims
