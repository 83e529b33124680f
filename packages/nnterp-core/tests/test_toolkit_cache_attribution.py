"""cache_values, accumulated_resid, decompose_resid and direct_logit_attribution against direct computations.

On three kinds of block: llama (the default pre-norm block, RMSNorm), gptj (a
parallel block, LayerNorm with biases, an unembedding bias) and gemma2 (the
sandwich block, Gemma's 1 + weight RMSNorm, softcapped logits).
"""

import pytest
import torch
from nnterp import Unavailable
from nnterp.toolkit.attribution import (
    ACCUMULATED_RESID,
    TWO_CONTRIBUTIONS,
    BIAS,
    DECOMPOSE_RESID,
    HEAD_OUTPUTS,
    accumulated_resid,
    decompose_resid,
    direct_logit_attribution,
)
from nnterp.components.layer import RESIDUAL_TERMS
from nnterp.toolkit.cache import ValueCache, block_order, cache_values, expand_names

FAMILIES = ["llama", "gptj", "gemma2"]
#: three lengths, so batches of two are padded to a length neither batch has alone
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world", "a b c"]
TOKENS = [5, 17, 42]




@pytest.fixture(scope="module")
def full(tiny_model):
    """Per family: the model and a cache of everything the attribution functions use."""
    made = {}

    def get(name):
        if name not in made:
            model = tiny_model(name)
            names = [*ACCUMULATED_RESID, *DECOMPOSE_RESID, *HEAD_OUTPUTS, "logits"]
            made[name] = model, cache_values(model, PROMPTS, names, batch_size=2, progress=False)
        return made[name]

    return get


# -- cache_values ---------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_cache_matches_one_direct_trace(tiny_model, family, read_directly):
    model = tiny_model(family)
    names = ["logits", "layers.*.layer_output", "layers.1.self_attn.attention_probabilities", "layers.-1.mlp.mlp_output"]
    cache = cache_values(model, PROMPTS, names, batch_size=2, progress=False)
    last = model.num_layers - 1
    expected = []
    for index in range(model.num_layers):
        expected += ["layers.1.self_attn.attention_probabilities"] if index == 1 else []
        expected += [f"layers.{last}.mlp.mlp_output"] if index == last else []
        expected.append(f"layers.{index}.layer_output")
    expected.append("logits")
    assert list(cache) == expected  # expanded, negative index resolved, in forward order
    reference = read_directly(model, PROMPTS, expected)
    for name in expected:
        assert cache[name].shape == reference[name].shape, name
        torch.testing.assert_close(cache[name], reference[name], atol=1e-5, rtol=1e-4, msg=name)
        assert not cache[name].requires_grad
    # the inputs the model read: all prompts padded together, left
    encoding = model.tokenizer(PROMPTS, padding=True, return_tensors="pt")
    assert torch.equal(cache.input_ids, encoding["input_ids"])
    assert torch.equal(cache.attention_mask, encoding["attention_mask"])
    assert cache.attention_mask[:, -1].all() and not cache.attention_mask[1:, 0].any()
    # the stacked view and negative layers
    assert torch.equal(cache["layers.*.layer_output"][-1], cache[f"layers.{last}.layer_output"])
    assert torch.equal(cache["layers.-1.mlp.mlp_output"], cache[f"layers.{last}.mlp.mlp_output"])


def test_cache_reads_every_value_of_every_block_in_one_trace(tiny_model, read_directly):
    model = tiny_model("llama")
    lacking = model.support()
    order = [value for value in block_order(model.layers[0]) if not lacking.get(value)]  # the residual terms it has not
    assert len(order) == len(block_order(model.layers[0])) - len(RESIDUAL_TERMS)
    cache = cache_values(model, PROMPTS, [f"layers.*.{value}" for value in order], progress=False)
    assert len(cache) == model.num_layers * len(order)
    reference = read_directly(model, PROMPTS, [f"layers.1.{value}" for value in order])
    for name, value in reference.items():
        torch.testing.assert_close(cache[name], value, atol=1e-5, rtol=1e-4, msg=name)


def test_block_order_on_the_three_kinds(tiny_model):
    interior = [
        "self_attn.attention_queries",
        "self_attn.attention_keys",
        "self_attn.attention_values",
        "self_attn.attention_scores",
        "self_attn.attention_probabilities",
        "self_attn.attention_head_outputs",
        "self_attn.attention_output",
    ]
    expected = [
        "layer_input",
        "layer_input_rescaling",
        "attention_norm_output",
        *interior,
        "layer_mid",
        "layer_mid_rescaling",
        "mlp_norm_output",
        "mlp_input",
        "mlp.mlp_activation",
        "mlp.mlp_neurons",
        "mlp.mlp_output",
        "per_layer_input_output",
        "layer_output_rescaling",
        "layer_output",
    ]
    for family in FAMILIES:  # gemma2 redeclares layer_mid; it stays where the base declares it
        assert block_order(tiny_model(family).layers[0]) == expected, family


def test_names_are_sorted_checked_and_unavailable_raises_before_running(tiny_model):
    model = tiny_model("gptj")
    scrambled = ["logits", "layers.1.layer_output", "layers.1.self_attn.attention_output", "layers.0.layer_input"]
    assert expand_names(model, scrambled) == [
        "layers.0.layer_input",
        "layers.1.self_attn.attention_output",
        "layers.1.layer_output",
        "logits",
    ]
    with pytest.raises(KeyError, match="no value"):
        expand_names(model, ["layers.0.self_attn.nope"])
    with pytest.raises(KeyError, match="no standard value"):
        expand_names(model, ["embeddings"])
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(Unavailable, match="parallel"):
            cache_values(model, PROMPTS, ["layers.*.layer_mid"], progress=False)
    finally:
        hook.remove()
    assert not calls


def test_device_and_dtype_per_batch(tiny_model, read_directly):
    model = tiny_model("llama")
    cache = cache_values(model, PROMPTS, ["layers.0.layer_output"], dtype=torch.float64, batch_size=1, progress=False)
    value = cache["layers.0.layer_output"]
    assert value.dtype == torch.float64 and value.device.type == "cpu" and value.shape[0] == len(PROMPTS)
    reference = read_directly(model, PROMPTS, ["layers.0.layer_output"])["layers.0.layer_output"]
    torch.testing.assert_close(value, reference.double(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_stop_at_layer_matches_the_full_run_and_skips_later_blocks(tiny_model, family):
    model = tiny_model(family)
    names = ["layers.0.self_attn.attention_output", "layers.0.layer_output"]
    full = cache_values(model, PROMPTS, names, batch_size=2, progress=False)
    calls = []
    hook = model.layers[1]._module.register_forward_hook(lambda *_: calls.append(1))
    try:
        early = cache_values(model, PROMPTS, names[:1], batch_size=2, progress=False, stop_at_layer=0)
    finally:
        hook.remove()
    assert not calls  # block 1 never ran
    assert torch.equal(early[names[0]], full[names[0]])
    with pytest.raises(ValueError, match="stop_at_layer"):
        cache_values(model, PROMPTS, ["logits"], progress=False, stop_at_layer=0)


def test_a_forward_in_another_order_falls_back_to_one_worker_per_value(tiny_model, read_directly):
    # Falcon binds its values before applying rotary to queries and keys, against the declared order
    model = tiny_model("falcon")
    names = [f"layers.0.self_attn.{value}" for value in ("attention_queries", "attention_keys", "attention_values")]
    cache = cache_values(model, PROMPTS, names, batch_size=2, progress=False)
    for name in names:
        reference = read_directly(model, PROMPTS, [name])[name]
        torch.testing.assert_close(cache[name], reference, atol=1e-5, rtol=1e-4, msg=name)
    early = cache_values(model, PROMPTS, names, batch_size=2, progress=False, stop_at_layer=0)
    for name in names:
        assert torch.equal(early[name], cache[name])


# -- accumulated_resid and decompose_resid -----------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_accumulated_resid_is_the_stream_at_each_boundary(full, family, read_directly):
    model, cache = full(family)
    stacked = accumulated_resid(cache)
    assert stacked.shape == (model.num_layers + 1, len(PROMPTS), cache.input_ids.shape[1], model.hidden_size)
    reference = read_directly(model, PROMPTS, ["layers.0.layer_input", *[f"layers.{i}.layer_output" for i in range(model.num_layers)]])
    for row, value in zip(stacked, reference.values()):
        torch.testing.assert_close(row, value, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_decompose_resid_adds_up_to_the_final_stream(full, family):
    model, cache = full(family)
    values, labels = decompose_resid(cache)
    assert values.shape[0] == 2 * model.num_layers + 1 == len(labels)
    assert labels[:3] == ["layers.0.layer_input", "layers.0.self_attn.attention_output", "layers.0.mlp.mlp_output"]
    for value, label in zip(values, labels):
        assert torch.equal(value, cache[label])
    torch.testing.assert_close(values.sum(0), cache[f"layers.{model.num_layers - 1}.layer_output"], atol=1e-5, rtol=1e-4)


#: blocks with terms beside their two contributions: a rescaled residual, a per-layer input and a rescaled sum,
#: LongCat-Flash's second sub-block
RESCALING = ["gemma4_text", "doge", "zaya", "beam", "longcat_flash"]


@pytest.mark.parametrize("family", RESCALING)
def test_decompose_resid_takes_every_term_of_a_block_that_rescales_its_stream(tiny_model, family):
    model = tiny_model(family)
    last = f"layers.{model.num_layers - 1}.layer_output"
    cache = cache_values(model, PROMPTS, [*DECOMPOSE_RESID, last, "logits"], batch_size=2, progress=False)
    values, labels = decompose_resid(cache)
    terms = [f"layers.{index}.{term}" for index in range(model.num_layers) for term in model.layers[index].contributions()]
    assert labels == ["layers.0.layer_input", *terms]
    residual = [index for index, label in enumerate(labels[1:], 1) if not label.endswith(TWO_CONTRIBUTIONS)]
    assert residual, labels
    torch.testing.assert_close(values.sum(0), cache[last], atol=1e-5, rtol=1e-4)
    # the new terms are what makes it add up: the sublayers' contributions alone do not
    kept = [index for index in range(len(labels)) if index not in residual]
    assert not torch.allclose(values[kept].sum(0), cache[last], atol=1e-3)
    attribution = direct_logit_attribution(model, cache, TOKENS)
    assert attribution.labels == [*labels, BIAS]
    torch.testing.assert_close(attribution.values.sum(0), attribution.logits, atol=1e-5, rtol=1e-4)


def test_the_contributions_group_expands_to_each_blocks_terms(tiny_model):
    model = tiny_model("gemma4_text")
    assert expand_names(model, ["layers.1.contributions"]) == [
        f"layers.1.{term}" for term in ("self_attn.attention_output", "mlp.mlp_output", "per_layer_input_output", "layer_output_rescaling")
    ]
    cache = cache_values(model, PROMPTS, ["layers.0.layer_input", "layers.*.self_attn.attention_output", "layers.*.mlp.mlp_output"], progress=False)
    with pytest.raises(KeyError, match="per_layer_input_output is not in the cache"):
        decompose_resid(cache)


def test_a_block_carrying_several_streams_is_refused_by_name(tiny_model):
    model = tiny_model("deepseek_v4")
    with pytest.raises(Unavailable, match="several residual streams"):
        expand_names(model, list(DECOMPOSE_RESID))
    with pytest.raises(Unavailable, match="several residual streams"):
        model.layers[0].layer_input_rescaling
    cache = ValueCache({}, torch.zeros(1, 1), torch.ones(1, 1), 1, contributions={0: ()})
    with pytest.raises(Unavailable, match="several residual streams"):
        decompose_resid(cache)


def test_missing_names_say_what_to_cache(tiny_model):
    model = tiny_model("llama")
    cache = cache_values(model, PROMPTS, ["layers.0.layer_input"], progress=False)
    with pytest.raises(KeyError, match="cache_values"):
        decompose_resid(cache)


# -- direct_logit_attribution -------------------------------------------------------


def frozen_norm(module, final, contribution):
    """The final norm with its scale frozen at ``final``'s, written out per norm class (the tests may know them)."""
    kind = type(module).__name__
    if kind == "LayerNorm":
        scale = (final.var(-1, unbiased=False, keepdim=True) + module.eps).sqrt()
        return module.weight * (contribution - contribution.mean(-1, keepdim=True)) / scale
    scale = (final.pow(2).mean(-1, keepdim=True) + getattr(module, "variance_epsilon", getattr(module, "eps", None))).sqrt()
    weight = 1 + module.weight if kind == "Gemma2RMSNorm" else module.weight
    return weight * contribution / scale


@pytest.mark.parametrize("family", FAMILIES)
def test_attributions_match_the_direct_computation_and_sum_to_the_logit(full, family, read_directly):
    model, cache = full(family)
    attribution = direct_logit_attribution(model, cache, TOKENS)
    values, labels, logits = attribution
    assert labels == [*decompose_resid(cache).labels, BIAS]
    assert values.shape == (len(labels), len(PROMPTS))
    # the model's own logits of the tokens, at every prompt's last position
    reference = read_directly(model, PROMPTS, ["logits"])["logits"][:, -1]
    ids = torch.tensor(TOKENS)
    torch.testing.assert_close(logits, reference[torch.arange(len(PROMPTS)), ids], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(values.sum(0), logits, atol=1e-5, rtol=1e-4)

    with torch.no_grad():
        norm, head = model.norm._module, model.lm_head._module
        final = cache[f"layers.{model.num_layers - 1}.layer_output"][:, -1]
        rows = head.weight[ids]
        by_hand = [(frozen_norm(norm, final, cache[label][:, -1]) * rows).sum(-1) for label in labels[:-1]]
        bias = (norm.bias * rows).sum(-1) if getattr(norm, "bias", None) is not None else torch.zeros(len(ids))
        if head.bias is not None:
            bias = bias + head.bias[ids]
        by_hand = torch.stack([*by_hand, bias])
        cap = getattr(model.text_config, "final_logit_softcapping", None)
        if cap is not None:  # gemma2: the softcap, applied as the ratio the model's logit has to the uncapped one
            uncapped = by_hand.sum(0)
            torch.testing.assert_close(torch.tanh(uncapped / cap) * cap, logits, atol=1e-5, rtol=1e-4)
            by_hand = by_hand * (torch.tanh(uncapped / cap) * cap / uncapped)
    torch.testing.assert_close(values, by_hand, atol=1e-5, rtol=1e-4)
    if family == "gptj":  # LayerNorm centers and has a bias; the unembedding too
        assert values[-1].abs().max() > 1e-3


@pytest.mark.parametrize("family", ["llama", "gptj"])
def test_heads_split_each_attention_contribution_through_o_proj(full, family):
    model, cache = full(family)
    whole = direct_logit_attribution(model, cache, TOKENS)
    split = direct_logit_attribution(model, cache, TOKENS, heads=True)
    torch.testing.assert_close(split.values.sum(0), whole.logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(split.logits, whole.logits)
    for layer in range(model.num_layers):
        attention = model.layers[layer].self_attn
        names = [label for label in split.labels if label.startswith(f"layers.{layer}.self_attn.")]
        assert len(names) == attention.num_heads + 1  # every head, and the projection's bias
        rows = [split.labels.index(name) for name in names]
        torch.testing.assert_close(
            split.values[rows].sum(0), whole.values[whole.labels.index(f"layers.{layer}.self_attn.attention_output")], atol=1e-5, rtol=1e-4
        )
    # one head by hand: its slice of o_proj's weight, then the same frozen norm and unembedding as its attention's
    with torch.no_grad():
        layer, head = model.num_layers - 1, 1
        weight = model.layers[layer].self_attn.o_proj._module.weight  # [hidden, heads * head_dim]
        width = model.layers[layer].self_attn.head_dim
        outputs = cache[f"layers.{layer}.self_attn.attention_head_outputs"][:, -1, head]
        contribution = outputs @ weight[:, head * width : (head + 1) * width].T
        final = cache[f"layers.{layer}.layer_output"][:, -1]
        rows = model.lm_head._module.weight[torch.tensor(TOKENS)]
        by_hand = (frozen_norm(model.norm._module, final, contribution) * rows).sum(-1)
    torch.testing.assert_close(split.values[split.labels.index(f"layers.{layer}.self_attn.heads.{head}")], by_hand, atol=1e-5, rtol=1e-4)


def test_heads_are_unavailable_where_a_scale_follows_the_projection(tiny_model):
    # granite scales attention_output by its residual multiplier: no norm, so no per-token scale to freeze
    model = tiny_model("granite")
    cache = cache_values(model, PROMPTS, [*DECOMPOSE_RESID, *HEAD_OUTPUTS], progress=False)
    direct_logit_attribution(model, cache, TOKENS)  # the whole rows are fine
    with pytest.raises(Unavailable, match=r"not o_proj\(attention_head_outputs\) on this family, nor a norm of it"):
        direct_logit_attribution(model, cache, TOKENS, heads=True)


def test_every_position_with_next_tokens(full):
    model, cache = full("llama")
    following = torch.roll(cache.input_ids, -1, dims=1)
    attribution = direct_logit_attribution(model, cache, following, position=None)
    assert attribution.values.shape == (2 * model.num_layers + 2, len(PROMPTS), cache.input_ids.shape[1])
    logits = cache["logits"].gather(-1, following[..., None])[..., 0]
    torch.testing.assert_close(attribution.logits, logits)
    torch.testing.assert_close(attribution.values.sum(0), logits, atol=1e-5, rtol=1e-4)
    last = direct_logit_attribution(model, cache, following[:, -1])
    torch.testing.assert_close(attribution.values[..., -1], last.values, atol=1e-6, rtol=1e-5)


def test_a_token_string_is_its_id(full):
    model, cache = full("llama")
    token = model.tokenizer.convert_ids_to_tokens(TOKENS[0])
    text = model.tokenizer.convert_tokens_to_string([token])
    by_text = direct_logit_attribution(model, cache, text)
    by_id = direct_logit_attribution(model, cache, TOKENS[0])
    torch.testing.assert_close(by_text.values, by_id.values)


def test_value_cache_is_a_mapping():
    cache = ValueCache({"layers.0.layer_output": torch.zeros(2, 3, 4)}, torch.zeros(2, 3), torch.ones(2, 3), 1)
    assert list(cache) == ["layers.0.layer_output"] and len(cache) == 1
    assert cache["layers.*.layer_output"].shape == (1, 2, 3, 4)
    with pytest.raises(KeyError, match="was not cached"):
        cache["logits"]
