"""TransformerLens hook names: ``standard_name``, ``transformer_lens_name``, and cache_values and patching taking them.

Against direct traces of the standard values, on gpt2 (no rotary, learned
positions), gptj (a parallel block, partial rotary, TransformerLens's plain
attention bridge) and gemma2 (the sandwich block, softcapped logits). That each
hook's tensor is what the table says is checked against TransformerLens itself
by tests/test_transformer_lens_compare.py.
"""

import pytest
import torch
from nnterp import Unavailable
from nnterp.toolkit import cache_values, patch_residual
from nnterp.toolkit.cache import expand_names
from nnterp.toolkit.names import HOOKS, NoStandardValue, UnknownName, hook_of, standard_name, transformer_lens_name

FAMILIES = ["gpt2", "gptj", "gemma2"]
PROMPTS = ["The Eiffel Tower is in Paris", "Hello world"]




@pytest.mark.parametrize("family", FAMILIES)
def test_every_hook_translates_or_says_why_not(tiny_model, family):
    model = tiny_model(family)
    for hook in HOOKS:
        name = f"blocks.1.{hook.name}" if hook.in_block else hook.name
        standard, why, _ = hook.on(model, 1)
        if standard is None:
            with pytest.raises(NoStandardValue) as raised:
                standard_name(model, name)
            assert isinstance(raised.value, Unavailable) and why in str(raised.value) and name in str(raised.value)
            continue
        translated = standard_name(model, name)
        assert translated == (f"layers.1.{standard}" if hook.in_block else standard)
        # a standard name passes through, and the reverse finds a hook holding the same value
        assert standard_name(model, translated) == translated
        back = transformer_lens_name(model, translated)
        assert standard_name(model, back) == translated, (name, back)


def test_cache_values_reads_hook_names_in_transformer_lens_layout(tiny_model, read_directly):
    model = tiny_model("gpt2")
    names = ["blocks.*.attn.hook_q", "blocks.1.hook_resid_pre", "blocks.-1.attn.hook_z", "hook_unembed"]
    cache = cache_values(model, PROMPTS, names, batch_size=1, progress=False)
    layers = range(model.num_layers)
    plain = read_directly(
        model,
        PROMPTS,
        [f"layers.{i}.self_attn.attention_queries" for i in layers[:1]]
        + ["layers.1.layer_input"]
        + [f"layers.{i}.self_attn.attention_queries" for i in layers[1:]]
        + ["layers.2.self_attn.attention_head_outputs", "logits"],
    )
    # keyed by the names asked for, one per layer, in forward order
    assert list(cache) == [
        "blocks.0.attn.hook_q",
        "blocks.1.hook_resid_pre",
        "blocks.1.attn.hook_q",
        "blocks.2.attn.hook_q",
        "blocks.2.attn.hook_z",
        "hook_unembed",
    ]
    heads, head_dim = model.layers[0].self_attn.num_heads, model.layers[0].self_attn.head_dim
    for i in layers:
        queries = plain[f"layers.{i}.self_attn.attention_queries"]  # [batch, heads, seq, head_dim]
        assert cache[f"blocks.{i}.attn.hook_q"].shape == (2, queries.shape[2], heads, head_dim)
        torch.testing.assert_close(cache[f"blocks.{i}.attn.hook_q"], queries.transpose(1, 2))
        # the standard name reads the same value in the standard layout
        torch.testing.assert_close(cache[f"layers.{i}.self_attn.attention_queries"], queries)
    stacked = cache["blocks.*.attn.hook_q"]
    torch.testing.assert_close(stacked, torch.stack([plain[f"layers.{i}.self_attn.attention_queries"].transpose(1, 2) for i in layers]))
    torch.testing.assert_close(cache["blocks.1.hook_resid_pre"], plain["layers.1.layer_input"])
    torch.testing.assert_close(cache["blocks.-1.attn.hook_z"], plain["layers.2.self_attn.attention_head_outputs"])
    torch.testing.assert_close(cache["hook_unembed"], plain["logits"])


def test_parallel_and_post_softmax_hooks_on_gptj(tiny_model, read_directly):
    model = tiny_model("gptj")
    cache = cache_values(model, PROMPTS, ["blocks.0.hook_mlp_in", "blocks.0.attn.hook_attn_scores", "hook_embed"], progress=False)
    plain = read_directly(model, PROMPTS, ["layers.0.layer_input", "layers.0.self_attn.attention_probabilities"])
    # the parallel MLP reads the stream entering the block; GPT-J's embeddings are that stream
    torch.testing.assert_close(cache["blocks.0.hook_mlp_in"], plain["layers.0.layer_input"])
    torch.testing.assert_close(cache["hook_embed"], plain["layers.0.layer_input"])
    # TransformerLens's "scores" on GPT-J are the pattern: rows sum to one where the prompt has tokens
    scores = cache["blocks.0.attn.hook_attn_scores"]
    torch.testing.assert_close(scores, plain["layers.0.self_attn.attention_probabilities"])
    torch.testing.assert_close(scores[0].sum(-1), torch.ones_like(scores[0].sum(-1)))
    with pytest.raises(Unavailable, match="parallel"):
        cache_values(model, PROMPTS, ["blocks.*.hook_resid_mid"], progress=False)


def test_sandwich_hooks_on_gemma2(tiny_model, read_directly):
    model = tiny_model("gemma2")
    cache = cache_values(model, PROMPTS, ["blocks.0.hook_resid_mid", "blocks.0.hook_mlp_in", "blocks.0.hook_attn_out"], progress=False)
    plain = read_directly(model, PROMPTS, ["layers.0.layer_input", "layers.0.self_attn.attention_output", "layers.0.layer_mid"])
    # the attention's contribution is after its post-norm, and the stream between the sublayers is what the MLP's norm reads
    torch.testing.assert_close(cache["blocks.0.hook_attn_out"], plain["layers.0.self_attn.attention_output"])
    torch.testing.assert_close(cache["blocks.0.hook_resid_mid"], plain["layers.0.layer_input"] + plain["layers.0.self_attn.attention_output"])
    torch.testing.assert_close(cache["blocks.0.hook_mlp_in"], plain["layers.0.layer_mid"])
    with pytest.raises(NoStandardValue, match="softcap"):
        standard_name(model, "hook_unembed")


def test_bad_names_fail_before_the_model_runs(tiny_model):
    model = tiny_model("gpt2")
    calls = []
    handle = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(UnknownName, match="blocks.0.hook_resid_pre") as raised:
            cache_values(model, PROMPTS, ["blocks.0.hook_resid_pr"], progress=False)
        assert isinstance(raised.value, KeyError)
        with pytest.raises(UnknownName, match="hook_embed"):
            standard_name(model, "embed")
        with pytest.raises(UnknownName, match="layers.0.self_attn.attention_scores"):
            standard_name(model, "layers.0.self_attn.attention_score")
        with pytest.raises(KeyError, match="3 layers"):
            cache_values(model, PROMPTS, ["blocks.7.hook_resid_pre"], progress=False)
        # GPT-2 adds position embeddings: the token embeddings alone are no standard value
        with pytest.raises(NoStandardValue, match="position embeddings"):
            cache_values(model, PROMPTS, ["hook_embed"], progress=False)
        with pytest.raises(NoStandardValue, match="weight and bias"):
            cache_values(model, PROMPTS, ["blocks.*.ln2.hook_normalized"], progress=False)
    finally:
        handle.remove()
    assert not calls


def test_block_relative_names_and_hook_of(tiny_model):
    model = tiny_model("gptj")
    assert standard_name(model, "hook_resid_pre") == "layer_input"
    assert standard_name(model, "attn.hook_z") == "self_attn.attention_head_outputs"
    assert transformer_lens_name(model, "self_attn.attention_probabilities") == "attn.hook_pattern"
    assert transformer_lens_name(model, "layers.0.layer_input") == "blocks.0.hook_resid_pre"
    with pytest.raises(KeyError, match="no TransformerLens hook"):
        transformer_lens_name(model, "layers.0.self_attn.attention_scores")  # GPT-J's hook_attn_scores holds the pattern
    assert hook_of("blocks.3.attn.hook_q").name == "attn.hook_q"
    assert hook_of("layers.3.layer_input") is None and hook_of("blocks.3.hook_embed") is None
    assert expand_names(model, [standard_name(model, "blocks.*.hook_resid_post")]) == [f"layers.{i}.layer_output" for i in range(3)]


def test_patch_residual_takes_transformer_lens_streams(tiny_model):
    model = tiny_model("gpt2")
    clean, corrupted = "The Eiffel Tower is in Paris", "The Eiffel Tower is in Parks"

    def metric(logits):
        return logits[0, -1, 5]

    standard = patch_residual(model, clean, corrupted, metric, layers=[1], positions=[-1, -2], stream="layer_mid", progress=False)
    hooked = patch_residual(model, clean, corrupted, metric, layers=[1], positions=[-1, -2], stream="hook_resid_mid", progress=False)
    assert hooked.site == "layer_mid"
    torch.testing.assert_close(hooked.values, standard.values)
    with pytest.raises(ValueError, match="hook_resid_pre"):
        patch_residual(model, clean, corrupted, metric, stream="attn.hook_z", progress=False)
