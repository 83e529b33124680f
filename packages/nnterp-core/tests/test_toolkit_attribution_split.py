"""direct_logit_attribution split per neuron, per expert and per head: each split adds up to the row it replaces, each term against plain hooks.

On llama (pre-norm, RMSNorm), gemma2 (sandwich: mlp_output and
attention_output are the post norms' outputs, softcapped logits), gptj (biased
down projection, LayerNorm) for neurons, mixtral (a mixture of experts) for
experts, and llama, gemma2 and mixtral for heads.
"""

import pytest
import torch
from nnterp import InvalidArgument, Unavailable
from nnterp.toolkit.attribution import DECOMPOSE_RESID, EXPERTS, HEAD_OUTPUTS, NEURONS, direct_logit_attribution
from nnterp.toolkit.cache import cache_values

#: two lengths, so the cache is left-padded
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
TOKENS = [5, 17]
TOL = {"atol": 1e-5, "rtol": 1e-4}


@pytest.fixture(scope="module")
def cached(tiny_model):
    made = {}

    def get(family):
        if family not in made:
            model = tiny_model(family)
            names = [*DECOMPOSE_RESID, "layers.-1.layer_output", "logits", *HEAD_OUTPUTS, *(EXPERTS if family == "mixtral" else NEURONS)]
            made[family] = model, cache_values(model, PROMPTS, names, batch_size=2, progress=False)
        return made[family]

    return get


def rows_of(attribution, layer, prefix):
    return [i for i, label in enumerate(attribution.labels) if label.startswith(f"layers.{layer}.") and prefix(label.split(".", 2)[2])]


@pytest.mark.parametrize("family, split", [("llama", "neurons"), ("gemma2", "neurons"), ("gptj", "neurons"), ("mixtral", "experts")])
def test_each_split_adds_up_to_the_mlp_output_it_replaces(cached, family, split):
    model, cache = cached(family)
    whole = direct_logit_attribution(model, cache, TOKENS)
    parts = direct_logit_attribution(model, cache, TOKENS, **{split: True})
    torch.testing.assert_close(parts.logits, whole.logits)
    torch.testing.assert_close(parts.values.sum(0), parts.logits, **TOL)
    for layer in range(model.num_layers):
        mlp = model.layers[layer].mlp
        own = rows_of(parts, layer, lambda term: not term.startswith("self_attn") and term != "layer_input")
        names = [parts.labels[i] for i in own]
        if split == "neurons":
            assert names[: mlp.intermediate_size] == [f"layers.{layer}.mlp.neurons.{n}" for n in range(mlp.intermediate_size)]
            assert names[mlp.intermediate_size] == f"layers.{layer}.mlp.down_proj.bias"
        else:
            assert names[: mlp.num_experts] == [f"layers.{layer}.mlp.experts.{e}" for e in range(mlp.num_experts)]
        if family == "gemma2":  # the post norm's bias: the block adds it after the neurons' terms
            assert names[-1] == f"layers.{layer}.post_feedforward_layernorm.bias"
        else:
            assert len(names) == (mlp.intermediate_size + 1 if split == "neurons" else mlp.num_experts)
        whole_row = whole.values[whole.labels.index(f"layers.{layer}.mlp.mlp_output")]
        torch.testing.assert_close(parts.values[own].sum(0), whole_row, **TOL)
        assert parts.values[own].abs().max() > 1e-4
        # every other row is the whole attribution's
        others = [i for i, label in enumerate(parts.labels) if label in whole.labels]
        torch.testing.assert_close(parts.values[others], whole.values[[whole.labels.index(parts.labels[i]) for i in others]])
    if family == "gptj":  # fc_out has a bias, and it is a row of its own
        assert parts.values[parts.labels.index("layers.0.mlp.down_proj.bias")].abs().max() > 1e-4


@pytest.mark.parametrize("family", ["llama", "gemma2", "mixtral"])
def test_the_heads_add_up_to_the_attention_output_they_replace(cached, family):
    model, cache = cached(family)
    whole = direct_logit_attribution(model, cache, TOKENS)
    parts = direct_logit_attribution(model, cache, TOKENS, heads=True)
    torch.testing.assert_close(parts.logits, whole.logits)
    torch.testing.assert_close(parts.values.sum(0), parts.logits, **TOL)
    for layer in range(model.num_layers):
        count = model.layers[layer].self_attn.num_heads
        attention_rows = set(rows_of(parts, layer, lambda term: term.startswith("self_attn.")))
        own = [i for i in range(len(parts.labels)) if i in attention_rows or parts.labels[i] == f"layers.{layer}.post_attention_layernorm.bias"]
        names = [parts.labels[i] for i in own]
        expected = [*(f"layers.{layer}.self_attn.heads.{h}" for h in range(count)), f"layers.{layer}.self_attn.o_proj.bias"]
        if family == "gemma2":  # the post-attention norm's bias: the block adds it after the heads' terms
            expected.append(f"layers.{layer}.post_attention_layernorm.bias")
        assert names == expected
        whole_row = whole.values[whole.labels.index(f"layers.{layer}.self_attn.attention_output")]
        torch.testing.assert_close(parts.values[own].sum(0), whole_row, **TOL)
        assert parts.values[own[:count]].abs().max() > 1e-4
        others = [i for i, label in enumerate(parts.labels) if label in whole.labels]
        torch.testing.assert_close(parts.values[others], whole.values[[whole.labels.index(parts.labels[i]) for i in others]])


# -- each term by hand, from plain hooks on the HF modules --------------------------------------


def run_alone(model, prompt, hooks):
    """One prompt through the HF model, unpadded, with forward hooks ``(module, fn)``; its logits."""
    ids = model.tokenizer(prompt, return_tensors="pt")["input_ids"]
    handles = [module.register_forward_hook(fn) for module, fn in hooks]
    try:
        with torch.no_grad():
            return model._module(input_ids=ids).logits[0, -1].float()
    finally:
        for handle in handles:
            handle.remove()


def frozen(module, stream, vector):
    """``module`` (an RMSNorm, Gemma's ``1 + weight`` or Llama's) on ``vector`` with its scale frozen at ``stream``'s."""
    scale = (stream.pow(2).mean(-1, keepdim=True) + getattr(module, "variance_epsilon", getattr(module, "eps", None))).sqrt()
    weight = 1 + module.weight if type(module).__name__.startswith("Gemma") else module.weight
    return weight * vector / scale


def by_hand(model, prompt, token, layer, family):
    """Each neuron's (or expert's) term of the logit of ``token`` at ``prompt``'s last position, from hooked values."""
    hf = model._module.model
    block, seen = hf.layers[layer], {}
    hooks = [(hf.layers[-1], lambda m, a, out: seen.__setitem__("final", (out[0] if isinstance(out, tuple) else out)[0, -1]))]
    if family == "mixtral":
        hooks.append((block.mlp.experts, lambda m, args, out: seen.__setitem__("experts", (m, args))))
    else:
        hooks.append((block.mlp.down_proj, lambda m, args, out: seen.__setitem__("neurons", args[0][0, -1])))
        if family == "gemma2":
            hooks.append((block.mlp, lambda m, a, out: seen.__setitem__("raw", out[0, -1])))
    logit = run_alone(model, prompt, hooks)[token]
    if family == "mixtral":
        experts, (hidden, indices, weights) = seen["experts"]
        # each expert's weighted output: the experts module run with every other slot's weight zeroed
        vectors = torch.stack([experts.forward(hidden, indices, weights * (indices == e)) for e in range(experts.num_experts)])[:, -1]
    else:
        matrix = block.mlp.down_proj.weight  # [hidden, intermediate]
        vectors = seen["neurons"][:, None] * matrix.T  # [intermediate, hidden]
        if family == "gemma2":
            vectors = frozen(block.post_feedforward_layernorm, seen["raw"], vectors)
    unembedded = frozen(hf.norm, seen["final"], vectors) @ model._module.lm_head.weight[token]
    return unembedded, logit


def heads_by_hand(model, prompt, token, layer, family):
    """Each head's term of the logit of ``token`` at ``prompt``'s last position: its slice of o_proj, the post norm frozen, the final norm frozen."""
    hf = model._module.model
    block, seen = hf.layers[layer], {}
    hooks = [
        (hf.layers[-1], lambda m, a, out: seen.__setitem__("final", (out[0] if isinstance(out, tuple) else out)[0, -1])),
        (block.self_attn.o_proj, lambda m, args, out: seen.update(heads=args[0][0, -1], raw=out[0, -1])),
    ]
    logit = run_alone(model, prompt, hooks)[token]
    weight, count = block.self_attn.o_proj.weight, model.layers[layer].self_attn.num_heads  # [hidden, heads * head_dim]
    width = weight.shape[1] // count
    vectors = torch.stack([seen["heads"][h * width : (h + 1) * width] @ weight[:, h * width : (h + 1) * width].T for h in range(count)])
    if family == "gemma2":  # the post-attention norm with the scale it had on o_proj's whole output
        vectors = frozen(block.post_attention_layernorm, seen["raw"], vectors)
    unembedded = frozen(hf.norm, seen["final"], vectors) @ model._module.lm_head.weight[token]
    return unembedded, logit


@pytest.mark.parametrize("family", ["llama", "gemma2", "mixtral"])
def test_each_head_matches_the_direct_computation(cached, family):
    model, cache = cached(family)
    split = direct_logit_attribution(model, cache, TOKENS, heads=True)
    layer = model.num_layers - 1
    rows = [i for i, label in enumerate(split.labels) if label.startswith(f"layers.{layer}.self_attn.heads.")]
    for column, (prompt, token) in enumerate(zip(PROMPTS, TOKENS)):
        unembedded, logit = heads_by_hand(model, prompt, token, layer, family)
        torch.testing.assert_close(split.values[rows, column], capped(model, unembedded, logit), **TOL)


def capped(model, unembedded, logit):
    """``unembedded`` terms carried to the model's ``logit``: gemma2's softcap, as the ratio of its logit to the uncapped one."""
    cap = getattr(model.text_config, "final_logit_softcapping", None)
    if cap is None:
        return unembedded
    return unembedded * (logit / (cap * torch.atanh(logit / cap)))


@pytest.mark.parametrize("family", ["llama", "gemma2", "mixtral"])
def test_each_term_matches_the_direct_computation(cached, family):
    model, cache = cached(family)
    split = direct_logit_attribution(model, cache, TOKENS, **{"experts" if family == "mixtral" else "neurons": True})
    layer = model.num_layers - 1
    kind = "experts" if family == "mixtral" else "neurons"
    rows = [i for i, label in enumerate(split.labels) if label.startswith(f"layers.{layer}.mlp.{kind}.")]
    for column, (prompt, token) in enumerate(zip(PROMPTS, TOKENS)):
        unembedded, logit = by_hand(model, prompt, token, layer, family)
        torch.testing.assert_close(split.values[rows, column], capped(model, unembedded, logit), **TOL)
        assert split.logits[column].item() == pytest.approx(logit.item(), abs=1e-5)


# -- what it refuses, and what it splits ------------------------------------------------------


def test_neurons_of_a_mixture_are_refused_and_layers_picks_the_blocks(cached):
    model, cache = cached("mixtral")
    with pytest.raises(Unavailable, match="experts=True"):
        direct_logit_attribution(model, cache, TOKENS, neurons=True)
    dense, dense_cache = cached("llama")
    # experts=True leaves a dense MLP whole
    whole = direct_logit_attribution(dense, dense_cache, TOKENS)
    assert direct_logit_attribution(dense, dense_cache, TOKENS, experts=True).labels == whole.labels
    one = direct_logit_attribution(dense, dense_cache, TOKENS, neurons=True, heads=True, layers=[-1])
    last = dense.num_layers - 1
    assert "layers.0.mlp.mlp_output" in one.labels and f"layers.{last}.mlp.mlp_output" not in one.labels
    assert f"layers.{last}.mlp.neurons.0" in one.labels and f"layers.{last}.self_attn.heads.0" in one.labels
    torch.testing.assert_close(one.values.sum(0), one.logits, **TOL)


def test_missing_neurons_say_what_to_cache(tiny_model):
    model = tiny_model("llama")
    cache = cache_values(model, PROMPTS, [*DECOMPOSE_RESID, "layers.-1.layer_output"], progress=False)
    with pytest.raises(KeyError, match="mlp_neurons"):
        direct_logit_attribution(model, cache, TOKENS, neurons=True)
    with pytest.raises(InvalidArgument, match="layers="):
        direct_logit_attribution(model, cache, TOKENS, neurons=True, layers=[model.num_layers])
