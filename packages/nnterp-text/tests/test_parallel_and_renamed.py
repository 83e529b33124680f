"""Parallel blocks (Phi, Cohere, GPT-NeoX, StableLM, GPT-J, CodeGen) and families that are a known block under other names."""

import pytest
import torch
from nnterp import PARALLEL, FamilyMismatch, StandardizedTransformer, TinyConfig, Unavailable
from nnterp_conformance.checkpoints import write_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import run
from nnterp_text.families import opt

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
PARALLEL_CHECKPOINTS = ["phi", "cohere", "cohere2", "cohere2_moe", "cohere_compass_text", "gpt_neox", "stablelm-parallel", "gptj", "codegen"]
SEQUENTIAL_CHECKPOINTS = [
    "gpt_neox-sequential",
    "stablelm",
    "persimmon",
    "gpt_bigcode",
    "gpt-sw3",
    "opt",
    "opt-projected",
    "biogpt",
    "modernbert-decoder",
    "ctrl",
]
COHERE = ["cohere", "cohere2", "cohere2_moe", "cohere_compass_text"]
#: the checks a checkpoint skips, and the reason each gives
SKIPS = {name: {"mid_stream": PARALLEL} for name in PARALLEL_CHECKPOINTS}
#: checks the kit cannot pass yet on a family that is right, and the kit's words: OPT's MLP runs on
#: token-flat rows, so down_proj's own output is [batch * seq, hidden] while down_proj(mlp_neurons)
#: is [batch, seq, hidden], and the check compares them without reshaping


def _fails_naming(result, block):
    assert result.status == "fail", result
    assert result.detail.startswith(f"layers[{block}]: "), result


def _read(model, prompt, *names, layer=1):
    found = []
    with torch.no_grad(), model.trace(prompt):
        block = model.layers[layer]
        for name in names:
            host = block
            *path, value = name.split(".")
            for part in path:
                host = getattr(host, part)
            found.append(getattr(host, value).detach().clone().save())
    return found


@pytest.mark.parametrize("name", PARALLEL_CHECKPOINTS + SEQUENTIAL_CHECKPOINTS)
def test_passes_every_check(tiny_model, name):
    verdicts = run(tiny_model(name), PROMPTS)
    failed = {v.name: v.detail for v in verdicts if v.status == "fail"}
    assert not failed, "\n".join(str(v) for v in verdicts if v.status == "fail")
    skipped = {v.name: v.detail for v in verdicts if v.status == "skip"}
    assert skipped.keys() == SKIPS.get(name, {}).keys()
    for check, reason in SKIPS.get(name, {}).items():
        assert reason in skipped[check]


@pytest.mark.parametrize("name", PARALLEL_CHECKPOINTS)
def test_parallel_block_with_the_block_output_as_mlp_contribution_fails(tiny_model, monkeypatch, name):
    model = tiny_model(name)
    contribution = type(model.layers[0].mlp).values()["mlp_output"]
    monkeypatch.setattr(contribution, "key", "../output")
    monkeypatch.setattr(contribution, "select", 0)
    _fails_naming(verdict("contribution", model, PROMPTS), 0)


def test_parallel_block_with_the_block_output_as_attention_contribution_fails(tiny_model, monkeypatch):
    model = tiny_model("gptj")
    monkeypatch.setattr(type(model.layers[0].self_attn).values()["attention_output"], "key", "../output")
    _fails_naming(verdict("contribution", model, PROMPTS), 0)


@pytest.mark.parametrize(("parallel", "sequential"), [("gpt_neox", "gpt_neox-sequential"), ("stablelm-parallel", "stablelm")])
def test_the_residual_switch_is_read_per_block(tiny_model, parallel, sequential):
    blocks = range(tiny_model(parallel).num_layers)
    assert tiny_model(parallel).support()["layer_mid"] == dict.fromkeys(blocks, PARALLEL)
    assert tiny_model(sequential).support()["layer_mid"] is None
    with pytest.raises(Unavailable, match="parallel block"):
        with tiny_model(parallel).trace("Hello"):
            tiny_model(parallel).layers[0].layer_mid.save()


def test_gpt_neox_parallel_mlp_reads_its_own_norm_of_the_block_input(tiny_model):
    model = tiny_model("gpt_neox")
    stream, normed = _read(model, "Hello world", "layer_input", "mlp_norm_output")
    with torch.no_grad():
        assert torch.allclose(normed, model.layers[1].post_attention_layernorm._module(stream), atol=1e-6)


def test_stablelm_parallel_has_one_norm_for_both_sublayers(tiny_model):
    model = tiny_model("stablelm-parallel")
    assert "post_attention_layernorm" not in model.layers[0].__dict__
    attention_normed, mlp_normed = _read(model, "Hello world", "attention_norm_output", "mlp_norm_output")
    assert torch.equal(attention_normed, mlp_normed)


@pytest.mark.parametrize("name", COHERE)
def test_cohere_logits_without_the_logit_scale_fail(tiny_model, monkeypatch, name):
    model = tiny_model(name)
    assert model._module.logit_scale not in (None, 1.0)
    monkeypatch.setattr(model, "family", model.family.replace(project_on_vocab=None))
    result = verdict("logits_from_last_layer", model, PROMPTS)
    assert result.status == "fail", result


def test_modernbert_logits_need_the_prediction_head(tiny_model, monkeypatch):
    model = tiny_model("modernbert-decoder")
    monkeypatch.setattr(model, "family", model.family.replace(project_on_vocab=lambda m, hidden: m.decoder(m.norm(hidden))))
    assert verdict("logits_from_last_layer", model, PROMPTS).status == "fail"


def test_gpt_bigcode_multi_query_keys_have_one_head(tiny_model):
    model = tiny_model("gpt_bigcode")
    attention = model.layers[0].self_attn
    assert (attention.num_heads, attention.num_kv_heads) == (4, 1)
    (keys,) = _read(model, "Hello world", "self_attn.attention_keys", layer=0)
    assert keys.shape[1] == 1


@pytest.mark.parametrize("name", ["opt", "opt-projected"])
def test_opt_queries_are_served_before_the_scale(tiny_model, name):
    model = tiny_model(name)
    queries, keys, scores, pattern = _read(
        model,
        "Hello world there",
        "self_attn.attention_queries",
        "self_attn.attention_keys",
        "self_attn.attention_scores",
        "self_attn.attention_probabilities",
    )
    products = queries @ keys.transpose(-1, -2) * model.layers[1].self_attn.qk_head_dim**-0.5
    attended = pattern > 0
    assert torch.allclose(products[attended], scores[attended], atol=1e-5)


def test_opt_inline_mlp_is_token_flat_in_the_model_and_served_by_position(tiny_model):
    model = tiny_model("opt")
    mid, mlp_out, output = _read(model, PROMPTS, "layer_mid", "mlp.mlp_output", "layer_output")
    assert mid.shape == output.shape == mlp_out.shape and mid.dim() == 3
    assert torch.allclose(mid + mlp_out, output, atol=1e-5)
    assert model.layers[0].post_attention_layernorm is model.layers[0].final_layer_norm


def test_opt_post_layer_norm_is_refused_at_load(tmp_path):
    write_checkpoint(TinyConfig("opt", {"do_layer_norm_before": False}), tmp_path)
    with pytest.raises(FamilyMismatch, match="do_layer_norm_before=False"):
        StandardizedTransformer(tmp_path, family=opt.FAMILY, attn_implementation="eager")
