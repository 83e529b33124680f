"""The families whose attention does its own arithmetic: GPT-Neo, GPT-NeoX-Japanese and XGLM."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import run
from nnterp_text.families.own_attention import inside_helper

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
OWN_ATTENTION = ["gpt_neo", "gpt_neox_japanese", "xglm"]
#: the checks a family skips, and the reason each gives
SKIPS: dict[str, dict[str, str]] = {}


@pytest.mark.parametrize("name", OWN_ATTENTION)
def test_passes_every_check(tiny_model, name):
    verdicts = run(tiny_model(name), PROMPTS)
    failed = [str(v) for v in verdicts if v.status == "fail"]
    assert not failed, "\n".join(failed)
    skipped = {v.name: v.detail for v in verdicts if v.status == "skip"}
    assert skipped.keys() == SKIPS.get(name, {}).keys()
    for check, reason in SKIPS.get(name, {}).items():
        assert reason in skipped[check]


@pytest.mark.parametrize("name", OWN_ATTENTION)
def test_scores_are_the_products_of_queries_and_keys_at_the_models_scale(tiny_model, name):
    # XGLM scales its queries as it projects them, but serves them unscaled, as the others do; GPT-Neo never scales
    scale = 1.0 if name == "gpt_neo" else None
    model = tiny_model(name)
    with torch.no_grad(), model.trace("Hello world there"):
        attention = model.layers[1].self_attn
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        scores = attention.attention_scores.save()
        pattern = attention.attention_probabilities.save()
    products = queries.float() @ keys.float().transpose(-1, -2) * (scale or model.layers[1].self_attn.qk_head_dim**-0.5)
    attended = pattern > 0
    assert torch.allclose(products[attended], scores[attended].float(), atol=1e-5)


def _fails_naming(result, block):
    assert result.status == "fail", result
    assert result.detail.startswith(f"layers[{block}]: "), result


def test_scores_read_as_the_pattern_fail_the_softmax_check(tiny_model, monkeypatch):
    model = tiny_model("gpt_neo")
    pattern = type(model.layers[0].self_attn).values()["attention_probabilities"]
    monkeypatch.setattr(pattern, "key", inside_helper("nn_functional_softmax_0.input"))
    _fails_naming(verdict("pattern_is_softmax_of_scores", model, PROMPTS), 0)


def test_returned_weights_as_the_pattern_are_causally_inert(tiny_model, monkeypatch):
    # GPT-Neo returns the very pattern it mixes the values with, but writing the returned copy moves nothing
    model = tiny_model("gpt_neo")
    pattern = type(model.layers[0].self_attn).values()["attention_probabilities"]
    monkeypatch.setattr(pattern, "key", "output")
    monkeypatch.setattr(pattern, "select", 1)
    result = verdict("written_pattern_moves_logits", model, PROMPTS)
    _fails_naming(result, 1)
    assert "left the logits unchanged" in result.detail


@pytest.fixture
def biased_last_block(tiny_model):
    # the checkpoint initializes the last block's output bias to zero, which would hide it
    model = tiny_model("gpt_neox_japanese")
    bias = model.layers[-1].self_attn._module.dense_bias
    saved = bias.detach().clone()
    with torch.no_grad():
        bias.add_(0.5)
    yield model
    with torch.no_grad():
        bias.copy_(saved)


def test_the_last_blocks_output_bias_is_part_of_the_attention_contribution(biased_last_block, monkeypatch):
    model = biased_last_block
    assert [block.self_attn._module.dense_bias is None for block in model.layers] == [True, True, False]
    assert verdict("contribution", model, PROMPTS).status == "pass"
    assert verdict("contribution_at_every_step", model, PROMPTS).status == "pass"
    contribution = type(model.layers[0].self_attn).values()["attention_output"]
    monkeypatch.setattr(contribution, "key", "output")
    monkeypatch.setattr(contribution, "select", 0)
    _fails_naming(verdict("contribution", model, PROMPTS), 2)


def test_inline_mlp_with_its_input_as_contribution_fails(tiny_model, monkeypatch):
    model = tiny_model("xglm")
    monkeypatch.setattr(type(model.layers[0].mlp).values()["mlp_output"], "key", "up_proj.input")
    _fails_naming(verdict("contribution", model, PROMPTS), 0)


def test_inline_mlp_is_the_blocks_own_modules(tiny_model):
    model = tiny_model("xglm")
    for block in model.layers:
        mlp = block.mlp
        assert mlp.parent is block and mlp in list(block)
        assert (mlp.up_proj, mlp.act_fn, mlp.down_proj) == (block.fc1, block.activation_fn, block.fc2)
        assert mlp.down_proj._module is block._module.fc2  # still after real weights replaced meta ones
        assert mlp.intermediate_size == block._module.fc1.out_features
    with pytest.raises(Unavailable, match="not a module the model calls"):
        with model.trace("Hello"):
            model.layers[0].mlp.output.save()
    with torch.no_grad(), model.trace("Hello world"):
        block = model.layers[1]
        called = block.mlp(block.mlp_norm_output).save()
        contribution = block.mlp.mlp_output.save()
    assert torch.allclose(called, contribution)
