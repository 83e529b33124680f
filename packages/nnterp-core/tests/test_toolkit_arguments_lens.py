"""The lens, steering, patching and gradient functions' arguments: checked before the model runs, prompts as strings or
ids, every batch left-padded whatever side the tokenizer pads, steering across generated steps.

Each refusal is an ``InvalidArgument`` naming the function, the argument and the value given; each accepted form is
checked against the strings' result or a plain torch forward hook on the transformers modules.
"""

from contextlib import contextmanager

import nnterp  # noqa: F401 - before any transformers.models module
import pytest
import torch
from nnterp import InvalidArgument, StandardizedTransformer
from nnterp.errors import ToolkitInsideTrace
from nnterp.toolkit import _arguments
from nnterp.toolkit.attribution import direct_logit_attribution
from nnterp.toolkit.gradients import attribution_patching, integrated_gradients
from nnterp.toolkit.lens import Prompt, logit_lens, next_token_probs, patchscope_generate, patchscope_lens, run_prompts, topk_closest_tokens
from nnterp.toolkit.patching import patch_heads, patch_residual
from nnterp.toolkit.steering import generate_steered, skip_layers, steer
from nnterp_conformance import tiny_checkpoint

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]  # different lengths: one row is padded
# two pairs one token apart, of different lengths
CLEAN = ["Mary and John met. J gave it to", "So J gave it to"]
CORRUPTED = ["Mary and John met. M gave it to", "So M gave it to"]
ATOL = 1e-5
METRIC_ATOL = 1e-4


def fresh(side="left"):
    """A tiny GPT-2 (learned positions: a padded row read at shifted positions shows) of its own, its tokenizer padding ``side``."""
    model = StandardizedTransformer(tiny_checkpoint("gpt2"), attn_implementation="eager")
    model.tokenizer.padding_side = side
    return model


def warm(model):
    with torch.no_grad(), model.trace("hello"):  # the first trace loads the weights, replacing the meta modules
        pass
    return model


@pytest.fixture(scope="module")
def gpt2():
    return warm(fresh())


@pytest.fixture(scope="module", params=["left", "right"])
def padded(request):
    return warm(fresh(request.param))


@contextmanager
def no_forward(model):
    """Assert the model's forward never starts inside the block."""
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        yield
    finally:
        hook.remove()
    assert not calls, "the model ran before the argument was refused"


def refused(model, call, function, argument, shown):
    """``call()`` raises ``InvalidArgument`` naming ``function(argument=shown)`` before the model runs."""
    with no_forward(model), pytest.raises(InvalidArgument) as caught:
        call()
    assert caught.value.function == function and caught.value.argument.startswith(argument)
    assert f"{function}({argument}" in str(caught.value) and shown in str(caught.value)


def metric_for(model):
    """Logit difference J - M at each prompt's last token, summed over the batch (so a batch's sweep is its prompts' sum)."""
    j, m = (model.tokenizer(t)["input_ids"][-1] for t in ("J", "M"))
    return lambda logits: (logits[:, -1, j] - logits[:, -1, m]).sum()


def hook_stream(block, edit):
    """A forward hook on a transformers block that edits its output stream in place: ``edit(stream, call)``."""
    calls = []

    def hook(module, args, output):
        stream = output[0] if isinstance(output, tuple) else output
        edit(stream, len(calls))
        calls.append(1)

    return block.register_forward_hook(hook)


# -- indices out of range are refused, not wrapped onto another block --------------------------


def test_steering_indices_out_of_range_are_refused(gpt2):
    assert gpt2.num_layers == 3
    vector = torch.randn(gpt2.hidden_size)
    cases = [
        (lambda: steer(gpt2, [5], vector), "steer", "layers", "[5]"),
        (lambda: steer(gpt2, 0, torch.randn(gpt2.hidden_size + 1)), "steer", "vector", "last axis must be the model's hidden_size"),
        (lambda: steer(gpt2, 0, vector, token_positions=[40]), "steer", "token_positions", "[40]"),
        (lambda: steer(gpt2, 0, vector, batch_index=[2]), "steer", "batch_index", "[2]"),
        (lambda: skip_layers(gpt2, 0, 7), "skip_layers", "end", "7"),
        (lambda: skip_layers(gpt2, 2, 1), "skip_layers", "end", "comes before start=2"),
        (lambda: skip_layers(gpt2, 0, 1, torch.zeros(1, 2, gpt2.hidden_size + 1)), "skip_layers", "with_", "hidden_size"),
    ]
    for call, function, argument, shown in cases:
        with pytest.raises(InvalidArgument) as caught, torch.no_grad(), gpt2.trace(PROMPTS):
            call()
        assert caught.value.function == function and caught.value.argument == argument
        assert f"{function}({argument}=" in str(caught.value) and shown in str(caught.value)


def test_lens_indices_out_of_range_are_refused_before_the_model_runs(gpt2):
    vector = torch.randn(gpt2.hidden_size)
    refused(gpt2, lambda: patchscope_lens(gpt2, PROMPTS, "x", layers=7, progress=False), "patchscope_lens", "layers", "7")
    refused(gpt2, lambda: patchscope_lens(gpt2, PROMPTS, "x", positions=[0, 50], progress=False), "patchscope_lens", "positions[1]", "50")
    refused(gpt2, lambda: patchscope_lens(gpt2, PROMPTS, "x", positions=[0], progress=False), "patchscope_lens", "positions", "[0]")
    refused(gpt2, lambda: patchscope_lens(gpt2, PROMPTS, "ab", target_position=9, progress=False), "patchscope_lens", "target_position", "9")
    refused(gpt2, lambda: patchscope_generate(gpt2, PROMPTS, "x", layers=[-4], progress=False), "patchscope_generate", "layers", "[-4]")
    refused(gpt2, lambda: logit_lens(gpt2, PROMPTS, positions=[40]), "logit_lens", "positions", "[40]")
    shortest = len(gpt2.tokenizer(PROMPTS[1])["input_ids"])  # a position in the longer prompt only reads the shorter's padding
    refused(gpt2, lambda: logit_lens(gpt2, PROMPTS, positions=-shortest - 1), "logit_lens", "positions", f"-{shortest + 1}")
    refused(gpt2, lambda: topk_closest_tokens(gpt2, vector, k=0), "topk_closest_tokens", "k", "0")
    refused(gpt2, lambda: topk_closest_tokens(gpt2, vector, k=10**6), "topk_closest_tokens", "k", "1000000")
    refused(gpt2, lambda: topk_closest_tokens(gpt2, vector[:-1]), "topk_closest_tokens", "vector", "hidden_size")
    refused(gpt2, lambda: run_prompts(gpt2, [Prompt("a", {"x": [1]})], batch_size=0), "run_prompts", "batch_size", "0")
    refused(gpt2, lambda: generate_steered(gpt2, PROMPTS, 3, vector), "generate_steered", "layers", "3")


def test_patching_indices_out_of_range_are_refused_before_the_model_runs(gpt2):
    metric = metric_for(gpt2)
    refused(gpt2, lambda: patch_residual(gpt2, CLEAN, CORRUPTED, metric, layers=[3], progress=False), "patch_residual", "layers", "[3]")
    refused(gpt2, lambda: patch_residual(gpt2, CLEAN, CORRUPTED, metric, positions=[-40], progress=False), "patch_residual", "positions", "[-40]")
    refused(gpt2, lambda: patch_heads(gpt2, CLEAN, CORRUPTED, metric, heads=[gpt2.num_heads], progress=False), "patch_heads", "heads", f"[{gpt2.num_heads}]")
    refused(gpt2, lambda: patch_residual(gpt2, CLEAN, CORRUPTED, metric, logits_at=[99], progress=False), "patch_residual", "logits_at", "[99]")
    refused(gpt2, lambda: patch_residual(gpt2, CLEAN, CORRUPTED, metric, stream="resid", progress=False), "patch_residual", "stream", "'resid'")
    refused(gpt2, lambda: attribution_patching(gpt2, CLEAN, CORRUPTED, metric, layers=[5], progress=False), "attribution_patching", "layers", "[5]")
    refused(gpt2, lambda: attribution_patching(gpt2, CLEAN, CORRUPTED, metric, positions=[30], progress=False), "attribution_patching", "positions", "[30]")
    refused(gpt2, lambda: integrated_gradients(gpt2, CLEAN, metric, "layers.3.layer_output", progress=False), "integrated_gradients", "value", "layers.3")
    refused(gpt2, lambda: integrated_gradients(gpt2, CLEAN, metric, "layers.0.layer_output", steps=0, progress=False), "integrated_gradients", "steps", "0")


def test_direct_logit_attribution_refuses_a_position_outside_the_cache(gpt2):
    from nnterp.toolkit.attribution import DECOMPOSE_RESID
    from nnterp.toolkit.cache import cache_values

    cache = cache_values(gpt2, PROMPTS, [*DECOMPOSE_RESID, "layers.-1.layer_output"])
    refused(gpt2, lambda: direct_logit_attribution(gpt2, cache, 5, position=40), "direct_logit_attribution", "position", "40")
    # a negative position counts from the end, as the last one does
    last = direct_logit_attribution(gpt2, cache, 5, position=-1)
    end = cache["layers.2.layer_output"].shape[1] - 1
    assert torch.equal(direct_logit_attribution(gpt2, cache, 5, position=end).values, last.values)


# -- where each function may be called ----------------------------------------------------------


def test_functions_that_run_the_model_refuse_an_open_trace(gpt2):
    vector, metric = torch.randn(gpt2.hidden_size), metric_for(gpt2)
    calls = {
        "logit_lens": lambda: logit_lens(gpt2, PROMPTS),
        "next_token_probs": lambda: next_token_probs(gpt2, PROMPTS),
        "patchscope_lens": lambda: patchscope_lens(gpt2, PROMPTS, "x", progress=False),
        "patchscope_generate": lambda: patchscope_generate(gpt2, PROMPTS, "x", progress=False),
        "topk_closest_tokens": lambda: topk_closest_tokens(gpt2, vector),
        "run_prompts": lambda: run_prompts(gpt2, [Prompt("a", {"x": [1]})], progress=False),
        "patch_residual": lambda: patch_residual(gpt2, CLEAN, CORRUPTED, metric, progress=False),
        "patch_heads": lambda: patch_heads(gpt2, CLEAN, CORRUPTED, metric, progress=False),
        "attribution_patching": lambda: attribution_patching(gpt2, CLEAN, CORRUPTED, metric, progress=False),
        "integrated_gradients": lambda: integrated_gradients(gpt2, CLEAN, metric, "layers.0.layer_output", progress=False),
        "generate_steered": lambda: generate_steered(gpt2, PROMPTS, 0, vector),
        "direct_logit_attribution": lambda: direct_logit_attribution(gpt2, None, 5),
    }
    for name, call in calls.items():
        with pytest.raises(ToolkitInsideTrace, match=rf"{name}\(\) runs the model itself"), torch.no_grad(), gpt2.trace("hello"):
            call()


def test_edits_refuse_to_run_outside_a_trace(gpt2):
    with pytest.raises(ToolkitInsideTrace, match=r"steer\(\) edits the forward of an open trace"):
        steer(gpt2, 0, torch.randn(gpt2.hidden_size))
    with pytest.raises(ToolkitInsideTrace, match=r"skip_layers\(\) edits the forward of an open trace"):
        skip_layers(gpt2, 0, 1)


def test_closest_tokens_load_the_weights_before_any_trace():
    model = fresh()
    vector = torch.randn(model.hidden_size)
    found = topk_closest_tokens(model, vector, k=3)  # reads lm_head before any trace: no meta tensor
    weight = model.lm_head._module.weight.detach().float()
    expected = (torch.nn.functional.normalize(vector, dim=-1) @ torch.nn.functional.normalize(weight, dim=-1).T).topk(3)
    assert torch.equal(found.indices, expected.indices)
    torch.testing.assert_close(found.values, expected.values)


# -- prompts as strings or token ids ---------------------------------------------------------------


def encodings(model, prompts):
    """The prompts as every form of ids the toolkit takes: a padded tensor with its mask (the tokenizer's encoding), id lists."""
    encoding = model.tokenizer(prompts, return_tensors="pt", padding=True)
    ids = [model.tokenizer(prompt)["input_ids"] for prompt in prompts]
    return [encoding, ids, [torch.tensor(row) for row in ids]]


def test_the_lenses_take_token_ids(padded):
    lens, probs = logit_lens(padded, PROMPTS, positions=-1), next_token_probs(padded, PROMPTS)
    scope = patchscope_lens(padded, PROMPTS, "cat -> cat; ?", progress=False)
    target = padded.tokenizer("cat -> cat; ?")["input_ids"]
    for given in encodings(padded, PROMPTS):
        torch.testing.assert_close(logit_lens(padded, given, positions=-1), lens, atol=ATOL, rtol=0)
        torch.testing.assert_close(next_token_probs(padded, given), probs, atol=ATOL, rtol=0)
        torch.testing.assert_close(patchscope_lens(padded, given, target, progress=False), scope, atol=ATOL, rtol=0)
    one = torch.tensor(padded.tokenizer(PROMPTS[1])["input_ids"])
    torch.testing.assert_close(next_token_probs(padded, one), probs[1:], atol=ATOL, rtol=0)
    tracked = run_prompts(padded, [Prompt(padded.tokenizer(p)["input_ids"], {"x": [5, 7]}) for p in PROMPTS], progress=False)
    assert [found["x"] for found in tracked] == pytest.approx([float(row[[5, 7]].sum()) for row in probs], abs=ATOL)


def test_the_sweeps_take_token_ids(gpt2):
    metric = metric_for(gpt2)
    sweep = patch_residual(gpt2, CLEAN, CORRUPTED, metric, positions=[-3, -1], progress=False)
    attributed = attribution_patching(gpt2, CLEAN, CORRUPTED, metric, values="layer_output", progress=False)
    gradients = integrated_gradients(gpt2, CLEAN, metric, "layers.1.layer_output", baseline=CORRUPTED, steps=2, progress=False)
    for clean, corrupted in zip(encodings(gpt2, CLEAN), encodings(gpt2, CORRUPTED)):
        again = patch_residual(gpt2, clean, corrupted, metric, positions=[-3, -1], progress=False)
        torch.testing.assert_close(again.values, sweep.values, atol=METRIC_ATOL, rtol=0)
        assert again.labels == sweep.labels
        again = attribution_patching(gpt2, clean, corrupted, metric, values="layer_output", progress=False)
        torch.testing.assert_close(again.values, attributed.values, atol=METRIC_ATOL, rtol=0)
        again = integrated_gradients(gpt2, clean, metric, "layers.1.layer_output", baseline=corrupted, steps=2, progress=False)
        torch.testing.assert_close(again.attributions, gradients.attributions, atol=ATOL, rtol=0)


def test_prompts_in_no_form_the_toolkit_takes_are_refused(gpt2):
    refused(gpt2, lambda: logit_lens(gpt2, 3.5), "logit_lens", "prompts", "3.5")
    refused(gpt2, lambda: next_token_probs(gpt2, ["a", [1, 2]]), "next_token_probs", "prompts", "a batch mixing")
    refused(gpt2, lambda: patchscope_lens(gpt2, [], "x", progress=False), "patchscope_lens", "source_prompts", "[]")
    refused(gpt2, lambda: patchscope_lens(gpt2, "a", ["x", "y"], progress=False), "patchscope_lens", "target_prompt", "['x', 'y']")
    refused(gpt2, lambda: patch_residual(gpt2, CLEAN, CORRUPTED[:1], metric_for(gpt2), progress=False), "patch_residual", "corrupted", "1 prompts")


# -- one batch reads as its prompts alone, whatever side the tokenizer pads ------------------------


def test_a_batch_reads_as_each_prompt_alone(padded):
    # positions are each prompt's own: 1 its second token, -1 its last, whatever the padding
    lens, probs = logit_lens(padded, PROMPTS, positions=[1, -1]), next_token_probs(padded, PROMPTS)
    scope = patchscope_lens(padded, PROMPTS, "cat -> cat; ?", positions=[-1, 1], progress=False)
    for row, prompt in enumerate(PROMPTS):
        torch.testing.assert_close(lens[row : row + 1], logit_lens(padded, prompt, positions=[1, -1]), atol=ATOL, rtol=0)
        torch.testing.assert_close(probs[row : row + 1], next_token_probs(padded, prompt), atol=ATOL, rtol=0)
        alone = patchscope_lens(padded, prompt, "cat -> cat; ?", positions=[-1, 1][row], progress=False)
        torch.testing.assert_close(scope[row : row + 1], alone, atol=ATOL, rtol=0)


def test_a_batchs_sweep_is_the_sum_of_its_prompts_sweeps(padded):
    metric = metric_for(padded)
    for sweep in (
        lambda clean, corrupted: patch_residual(padded, clean, corrupted, metric, positions=[-3, -1], progress=False),
        lambda clean, corrupted: attribution_patching(padded, clean, corrupted, metric, values="layer_input", positions=[-3, -1], progress=False),
    ):
        batch = sweep(CLEAN, CORRUPTED)
        alone = [sweep(clean, corrupted) for clean, corrupted in zip(CLEAN, CORRUPTED)]
        torch.testing.assert_close(batch.values, sum(result.values for result in alone), atol=METRIC_ATOL, rtol=0)
        assert batch.metric_corrupted == pytest.approx(sum(result.metric_corrupted for result in alone), abs=METRIC_ATOL)


def test_steering_a_batch_at_its_last_tokens_is_steering_each_prompt(padded):
    vector = torch.randn(padded.hidden_size)
    edit = lambda model: steer(model, 1, vector, 2.0, token_positions=-1)  # noqa: E731
    batch = next_token_probs(padded, PROMPTS, edit=edit)
    for row, prompt in enumerate(PROMPTS):
        torch.testing.assert_close(batch[row : row + 1], next_token_probs(padded, prompt, edit=edit), atol=ATOL, rtol=0)
    assert not torch.allclose(batch, next_token_probs(padded, PROMPTS), atol=ATOL)


# -- attribution patching of heads at some positions -------------------------------------------


def test_head_attributions_at_some_positions_add_up_to_all_positions(gpt2):
    metric = metric_for(gpt2)
    run = lambda positions: attribution_patching(gpt2, CLEAN, CORRUPTED, metric, positions=positions, progress=False)  # noqa: E731
    every = run(None)
    width = _arguments.prompts(gpt2, CLEAN, function="test").input_ids.shape[1]
    split = width - 3
    early, late = run(list(range(split))), run(list(range(split, width)))
    # each cell is metric_corrupted + the head's terms at the given positions: two disjoint sets add up to all of them
    total = early.values + late.values - early.metric_corrupted
    torch.testing.assert_close(total, every.values, atol=METRIC_ATOL, rtol=0)
    assert not torch.allclose(late.values, every.values, atol=METRIC_ATOL)  # the positions are not ignored
    # -1 is the last position
    torch.testing.assert_close(run([-1]).values, run([width - 1]).values, atol=0, rtol=0)


# -- steering across generated steps -----------------------------------------------------------


def hooked_generate(model, prompts, layer, vector, steps):
    """Greedy transformers generation with ``vector`` added to block ``layer``'s output stream on its first ``steps`` calls."""
    batch = _arguments.prompts(model, prompts, function="test")
    block = model.layers[layer]._module
    hook = hook_stream(block, lambda stream, call: stream.add_(vector) if call < steps else None)
    try:
        with torch.no_grad():
            return model._module.generate(**batch.inputs, max_new_tokens=6, do_sample=False, pad_token_id=model.tokenizer.pad_token_id)
    finally:
        hook.remove()


def test_generate_steered_steers_every_generated_step(gpt2):
    torch.manual_seed(1)
    vector = torch.randn(gpt2.hidden_size)
    every = hooked_generate(gpt2, PROMPTS, 1, vector, steps=6)
    prompt_only = hooked_generate(gpt2, PROMPTS, 1, vector, steps=1)
    assert not torch.equal(every, prompt_only)  # the later steps' steering changes what is generated
    found = generate_steered(gpt2, PROMPTS, 1, vector, max_new_tokens=6)
    assert torch.equal(found, every)
    # steer in a generate trace, outside tracer.all(), steers the prompt's pass alone, as its docstring says
    batch = _arguments.prompts(gpt2, PROMPTS, function="test")
    with torch.no_grad(), gpt2.generate(batch.inputs, max_new_tokens=6, do_sample=False) as tracer:
        steer(gpt2, 1, vector)
        ids = tracer.result.save()
    assert torch.equal(ids, prompt_only)
