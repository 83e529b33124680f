"""Attribution patching and integrated gradients against gradients taken with plain torch hooks on the HuggingFace blocks."""

import pytest
import torch
from nnterp import InvalidArgument
from nnterp.toolkit.gradients import attribution_patching, integrated_gradients

FAMILIES = ["llama", "gptj", "gemma2"]
# one token apart: "J" / "M" after the period
CLEAN = "Mary and John met. J gave it to"
CORRUPTED = "Mary and John met. M gave it to"


def metric_for(model):
    tokenizer = model.tokenizer
    j, m = tokenizer("J")["input_ids"][-1], tokenizer("M")["input_ids"][-1]
    return lambda logits: (logits[:, -1, j] - logits[:, -1, m]).mean()


def _stream(output):
    return output[0] if isinstance(output, tuple) else output


def _with_stream(output, stream):
    return (stream, *output[1:]) if isinstance(output, tuple) else stream


def hooked_run(model, prompt, layer, *, replace=None):
    """A plain transformers forward of ``prompt``: the metric, and block ``layer``'s output stream with its gradient.

    ``replace(stream)`` gives the tensor the block hands on instead (a leaf the gradient is taken at).
    """
    with torch.no_grad(), model.trace(prompt):  # the first trace loads the weights, replacing the meta modules
        pass
    block = model.layers[layer]._module
    ids = model.tokenizer(prompt, return_tensors="pt")
    kept = {}

    def hook(module, args, output):
        stream = _stream(output)
        if replace is not None:
            stream = replace(stream.detach()).requires_grad_(True)
        else:
            stream.retain_grad()
        kept["stream"] = stream
        return _with_stream(output, stream)

    handle = block.register_forward_hook(hook)
    try:
        logits = model._module(**ids).logits
    finally:
        handle.remove()
    metric = metric_for(model)(logits)
    metric.backward()
    return float(metric.detach()), kept["stream"].detach(), kept["stream"].grad


@pytest.mark.parametrize("name", FAMILIES)
def test_attribution_patching_is_the_clean_minus_corrupted_difference_times_the_gradient(tiny_model, name):
    model = tiny_model(name)
    layer = 1
    sweep = attribution_patching(model, CLEAN, CORRUPTED, metric_for(model), values="layer_output", layers=[layer], progress=False)
    _, clean, _ = hooked_run(model, CLEAN, layer)
    corrupted_metric, corrupted, gradient = hooked_run(model, CORRUPTED, layer)
    expected = ((clean - corrupted) * gradient).sum(-1).sum(0)  # per position
    assert sweep.axes == ("layer", "position")
    assert sweep.metric_corrupted == pytest.approx(corrupted_metric, abs=1e-5)
    torch.testing.assert_close(sweep.values[0] - sweep.metric_corrupted, expected.float(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["llama", "gptj"])
def test_head_attributions_add_up_to_the_attention_output_attribution_through_a_linear_projection(tiny_model, name):
    # with no norm after the output projection, the heads' estimate summed is the attention output's summed over positions
    model = tiny_model(name)
    sweeps = attribution_patching(model, CLEAN, CORRUPTED, metric_for(model), values=["heads", "attention_output"], progress=False)
    heads, attention = sweeps["heads"], sweeps["attention_output"]
    assert heads.axes == ("layer", "head") and heads.values.shape[1] == model.layers[0].self_attn.num_heads
    per_head = (heads.values - heads.metric_corrupted).sum(1)
    per_position = (attention.values - attention.metric_corrupted).sum(1)
    torch.testing.assert_close(per_head, per_position, atol=1e-5, rtol=1e-4)
    assert per_head.abs().max() > 1e-4  # the prompts differ, so something is attributed


def test_attribution_patching_reads_like_activation_patching_and_normalizes(tiny_model):
    model = tiny_model("llama")
    sweep = attribution_patching(model, CLEAN, CORRUPTED, metric_for(model), values="layer_input", layers=[0], progress=False)
    tokens = model.tokenizer(CLEAN)["input_ids"]
    differ = [i for i, (a, b) in enumerate(zip(tokens, model.tokenizer(CORRUPTED)["input_ids"])) if a != b]
    # the prompts are one token apart: at the embeddings, only that position carries a difference to attribute
    others = [i for i in range(len(tokens)) if i not in differ]
    torch.testing.assert_close(sweep.values[0, others], torch.full((len(others),), sweep.metric_corrupted), atol=1e-6, rtol=0)
    assert sweep.labels["position"][differ[0]] == model.tokenizer.decode([tokens[differ[0]]])
    assert sweep.normalized().metric_clean == 1.0


@pytest.mark.parametrize("name", FAMILIES)
def test_integrated_gradients_at_one_step_is_the_midpoint_gradient_times_the_path(tiny_model, name):
    model = tiny_model(name)
    layer = 1
    _, clean, _ = hooked_run(model, CLEAN, layer)
    _, corrupted, _ = hooked_run(model, CORRUPTED, layer)
    found = integrated_gradients(model, CLEAN, metric_for(model), f"layers.{layer}.layer_output", baseline=CORRUPTED, steps=1, progress=False)
    _, _, gradient = hooked_run(model, CLEAN, layer, replace=lambda stream: corrupted + 0.5 * (clean - corrupted))
    torch.testing.assert_close(found.attributions, ((clean - corrupted) * gradient).float(), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name", FAMILIES)
def test_integrated_gradients_add_up_to_the_metric_difference_as_the_steps_grow(tiny_model, name):
    model = tiny_model(name)
    metric = metric_for(model)
    coarse = integrated_gradients(model, CLEAN, metric, "layers.1.layer_output", baseline=CORRUPTED, steps=2, progress=False)
    fine = integrated_gradients(model, CLEAN, metric, "layers.1.layer_output", baseline=CORRUPTED, steps=16, progress=False)
    clean_metric, _, _ = hooked_run(model, CLEAN, 1)
    corrupted_metric, _, _ = hooked_run(model, CORRUPTED, 1)
    assert fine.metric == pytest.approx(clean_metric, abs=1e-5)
    assert fine.metric_baseline == pytest.approx(corrupted_metric, abs=1e-5)
    assert fine.error <= coarse.error
    assert fine.relative_error < 0.01


def test_integrated_gradients_default_baseline_is_zero(tiny_model):
    model = tiny_model("llama")
    value = "layers.0.self_attn.attention_head_outputs"
    found = integrated_gradients(model, CLEAN, metric_for(model), value, steps=8, progress=False)
    zero = integrated_gradients(model, CLEAN, metric_for(model), value, baseline=torch.zeros(()), steps=8, progress=False)
    assert found.attributions.shape[-2:] == (model.layers[0].self_attn.num_heads, model.layers[0].self_attn.head_dim)
    torch.testing.assert_close(found.attributions, zero.attributions)
    assert found.metric_baseline == zero.metric_baseline


def test_gradient_methods_refuse_what_they_cannot_differentiate(tiny_model):
    model = tiny_model("llama")
    with pytest.raises(ValueError, match="must return one number computed from the logits as a tensor"):
        attribution_patching(model, CLEAN, CORRUPTED, lambda logits: 1.0, values="layer_input", progress=False)
    with pytest.raises(InvalidArgument, match=r"attribution_patching\(values='resid_pre'\): 'resid_pre' is none of"):
        attribution_patching(model, CLEAN, CORRUPTED, metric_for(model), values="resid_pre", progress=False)
    with pytest.raises(InvalidArgument, match="tokenize to the same length"):
        attribution_patching(model, CLEAN, "Mary", metric_for(model), progress=False)
    with pytest.raises(InvalidArgument, match="'layers.<index>.<name>'"):
        integrated_gradients(model, CLEAN, metric_for(model), "layer_output", progress=False)
    with pytest.raises(InvalidArgument, match=r"integrated_gradients\(steps=0\): expected an int of at least 1"):
        integrated_gradients(model, CLEAN, metric_for(model), "layers.0.layer_output", steps=0, progress=False)
    with pytest.raises(InvalidArgument, match=r"integrated_gradients\(value='layers.9.layer_output'\): block 9: the model has 3 blocks"):
        integrated_gradients(model, CLEAN, metric_for(model), "layers.9.layer_output", progress=False)


def test_attribution_patching_takes_transformer_lens_hook_names(tiny_model):
    model = tiny_model("gpt2")
    metric = metric_for(model)
    by_hook = attribution_patching(model, CLEAN, CORRUPTED, metric, values=["attn.hook_z", "hook_resid_pre"], progress=False)
    by_name = attribution_patching(model, CLEAN, CORRUPTED, metric, values=["heads", "layer_input"], progress=False)
    torch.testing.assert_close(by_hook["attn.hook_z"].values, by_name["heads"].values)
    torch.testing.assert_close(by_hook["hook_resid_pre"].values, by_name["layer_input"].values)
    assert by_hook["attn.hook_z"].site == "self_attn.attention_head_outputs"


def test_a_value_no_gradient_reaches_is_said_not_waited_for():
    from nnterp import Unavailable
    from nnterp.registry import checkpoint_family, family_named
    from nnterp_conformance.mutants import _detached, moved
    from nnterp_conformance.runner import load
    from nnterp_conformance.variants import with_envoys

    plain = load("llama")
    block = type(plain.layers[0])
    detached = moved(block, "layer_output served detached", layer_output=_detached(block.layer_output))
    family = with_envoys(family_named(checkpoint_family("llama")), {type(plain.layers[0]._module): detached}, name="detached_llama")
    model = load("llama", family=family)
    with pytest.raises(Unavailable, match="no gradient reaches it"):
        attribution_patching(model, CLEAN, CORRUPTED, metric_for(model), values="layer_output", progress=False)
