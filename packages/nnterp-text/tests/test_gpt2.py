"""GPT-2 under the standard names: every identity, its aliases, and its own reasons."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import run

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_gpt2_passes_every_check(tiny_model):
    failed = [str(v) for v in run(tiny_model("gpt2"), PROMPTS) if v.status != "pass"]
    assert not failed, "\n".join(failed)


def test_standard_names_alias_native_envoys(tiny_model):
    model = tiny_model("gpt2")
    assert model.layers is model.transformer.h
    assert model.embed_tokens is model.transformer.wte and model.norm is model.transformer.ln_f
    for block in model.layers:
        assert block.self_attn is block.attn
        assert block.self_attn.o_proj is block.attn.c_proj
        assert block.mlp.down_proj is block.mlp.c_proj and block.mlp.act_fn is block.mlp.act
        assert block.input_layernorm is block.ln_1 and block.post_attention_layernorm is block.ln_2
    assert verdict("standard_names_alias_native_envoys", model, PROMPTS).status == "pass"


def test_every_source_value_resolves_on_every_layer(tiny_model):
    model = tiny_model("gpt2")
    attention = type(model.layers[0].self_attn)
    inside = [name for name, value in attention.values().items() if value.inside_forward()]
    assert len(inside) == 6
    for name in inside:
        found = []
        with torch.no_grad(), model.trace(PROMPTS):
            for block in model.layers:
                found.append(getattr(block.self_attn, name))
        assert len(found) == model.num_layers and all(isinstance(value, torch.Tensor) for value in found)


def test_reorder_and_upcast_takes_the_attention_off_the_interface(tiny_model):
    model = tiny_model("gpt2-reorder")
    reason = model.support()["self_attn.attention_probabilities"][0]
    assert "reorder_and_upcast_attn" in reason
    with pytest.raises(Unavailable, match="reorder_and_upcast_attn"):
        with model.trace("Hello"):
            model.layers[0].self_attn.attention_scores.save()
    assert verdict("contribution", model, PROMPTS).status == "pass"


def test_queries_are_split_views_torch_refuses_to_edit_in_place_but_assignment_reaches_the_model(tiny_model):
    model = tiny_model("gpt2")
    with model.trace("Hello world"):
        baseline = model.logits.save()
    with pytest.raises(RuntimeError, match="view"):
        with model.trace("Hello world"):
            model.layers[1].self_attn.attention_queries[:] = 0
    with torch.no_grad(), model.trace("Hello world"):
        queries = model.layers[1].self_attn.attention_queries
        model.layers[1].self_attn.attention_queries = torch.zeros_like(queries)
        edited = model.logits.save()
    assert not torch.equal(baseline, edited)


@pytest.mark.parametrize("wrong", ["../output", "../post_attention_layernorm.input"])
def test_pointing_attention_output_at_a_stream_fails_the_contribution_check(tiny_model, monkeypatch, wrong):
    # the bug two libraries shipped: the module boundary, residual included, as the contribution
    model = tiny_model("gpt2")
    monkeypatch.setattr(type(model.layers[0].self_attn).values()["attention_output"], "key", wrong)
    result = verdict("contribution", model, PROMPTS)
    assert result.status == "fail", result
    assert result.detail.startswith("layers[0]: ") and "off by" in result.detail
