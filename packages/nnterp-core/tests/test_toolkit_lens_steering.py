"""The toolkit's lenses (nnterp.toolkit.lens) and stream interventions (nnterp.toolkit.steering), each against a direct computation.

Three families of different block kinds: llama (pre-norm), gptj (parallel
block returning a tuple, LayerNorm with biases), gemma2 (sandwich norms,
softcapped logits).
"""

import pytest
import torch
from nnterp.toolkit.lens import (
    Prompt,
    logit_lens,
    next_token_probs,
    patchscope_generate,
    patchscope_lens,
    run_prompts,
    topk_closest_tokens,
)
from nnterp.toolkit.steering import skip_layers, steer

FAMILIES = ["llama", "gptj", "gemma2"]
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]  # different lengths: the second is left-padded
TARGET = "cat -> cat; 1135 -> 1135; hello -> hello; ?"
ATOL = 1e-5


@pytest.fixture(params=FAMILIES)
def model(request, tiny_model):
    torch.manual_seed(0)
    return tiny_model(request.param)


def direct(model, prompts, edit=None, start=0):
    """Each layer's input and output (from ``start`` on, after ``edit``) and the logits, from one trace."""
    found = {"inputs": [None] * start, "outputs": [None] * start}
    with torch.no_grad(), model.trace(prompts):
        if edit is not None:
            edit(model)
        for layer in model.layers[start:]:
            found["inputs"].append(layer.layer_input.clone())
            found["outputs"].append(layer.layer_output.clone())
        found["logits"] = model.logits.clone()
    return found


def length(model, prompt):
    return len(model.tokenizer(prompt)["input_ids"])


# -- logit lens ----------------------------------------------------------------------


def test_logit_lens_reads_every_layer_and_ends_at_the_model(model):
    lens = logit_lens(model, PROMPTS)
    run = direct(model, PROMPTS)
    batch, seq = run["logits"].shape[:2]
    assert lens.shape == (batch, model.num_layers, seq, model.vocab_size)
    assert lens.device.type == "cpu" and not lens.requires_grad
    torch.testing.assert_close(lens[:, -1], run["logits"].float().softmax(-1), atol=ATOL, rtol=0)
    with torch.no_grad():
        for index, hidden in enumerate(run["outputs"]):
            expected = model.project_on_vocab(hidden).float().softmax(-1)
            torch.testing.assert_close(lens[:, index], expected, atol=ATOL, rtol=0)
    # an int position drops the seq axis, as indexing does
    last = logit_lens(model, PROMPTS, positions=-1)
    assert last.shape == (batch, model.num_layers, model.vocab_size)
    torch.testing.assert_close(last, lens[:, :, -1], atol=ATOL, rtol=0)


def test_inverse_lens_is_the_lens_of_the_negated_stream(model):
    lens, inverse = logit_lens(model, PROMPTS, inverse=True)
    torch.testing.assert_close(lens, logit_lens(model, PROMPTS))
    run = direct(model, PROMPTS)
    with torch.no_grad():
        for index, hidden in enumerate(run["outputs"]):
            expected = model.project_on_vocab(-hidden).float().softmax(-1)
            torch.testing.assert_close(inverse[:, index], expected, atol=ATOL, rtol=0)
    if "RMSNorm" in type(model.norm._module).__name__ and model.lm_head._module.bias is None:
        # odd norm, no lm_head bias: the negated stream's logits are the negated logits
        torch.testing.assert_close(inverse[:, -1], (-run["logits"]).float().softmax(-1), atol=ATOL, rtol=0)
    assert not torch.allclose(inverse[:, -1], lens[:, -1])


# -- next-token probabilities ------------------------------------------------------


def test_next_token_probs_is_the_last_positions_distribution(model):
    probs = next_token_probs(model, PROMPTS)
    run = direct(model, PROMPTS)
    assert probs.shape == (len(PROMPTS), model.vocab_size)
    torch.testing.assert_close(probs, run["logits"][:, -1].float().softmax(-1), atol=ATOL, rtol=0)
    # the left-padded row is the prompt's own next token
    torch.testing.assert_close(probs[1], next_token_probs(model, PROMPTS[1])[0], atol=1e-4, rtol=0)


# -- patchscope ----------------------------------------------------------------------


def test_patching_a_prompts_own_state_changes_nothing(model):
    plain = next_token_probs(model, TARGET)[0]
    position = 3  # counted from the prompt's first token
    for target_position in (-1, position):
        own = position if target_position == position else -1
        patched = patchscope_lens(model, TARGET, TARGET, positions=own, target_position=target_position, progress=False)
        assert patched.shape == (1, model.num_layers, model.vocab_size)
        for layer in range(model.num_layers):
            torch.testing.assert_close(patched[0, layer], plain, atol=ATOL, rtol=0)


def test_patchscope_at_the_last_layer_reads_the_sources_own_lens(model):
    # source 1 is left-padded in the source batch: its position 2 is counted from its own first token
    positions = [-1, 2]
    patched = patchscope_lens(model, PROMPTS, TARGET, positions=positions, layers=[-1], progress=False)
    assert patched.shape == (2, 1, model.vocab_size)
    for row, (prompt, position) in enumerate(zip(PROMPTS, positions)):
        own = logit_lens(model, prompt)[0, -1, position]
        torch.testing.assert_close(patched[row, 0], own, atol=1e-4, rtol=0)
    # a foreign state written early changes the target's prediction
    early = patchscope_lens(model, PROMPTS, TARGET, layers=[0], progress=False)
    assert not torch.allclose(early[0, 0], next_token_probs(model, TARGET)[0], atol=1e-4)


def test_patchscope_generate_with_its_own_state_generates_as_the_model_does(model):
    ids = []
    with torch.no_grad(), model.generate(TARGET, max_new_tokens=3, do_sample=False) as tracer:
        ids.append(tracer.result)
    plain = ids[0][:, length(model, TARGET) :]
    generated = patchscope_generate(model, TARGET, TARGET, layers=[0, model.num_layers - 1], max_new_tokens=3, progress=False)
    assert sorted(generated) == [0, model.num_layers - 1]
    for tokens in generated.values():
        assert torch.equal(tokens, plain)
    # the last layer's patch makes the first new token the source's own prediction
    last = patchscope_generate(model, PROMPTS, TARGET, layers=-1, max_new_tokens=2, progress=False)[model.num_layers - 1]
    expected = logit_lens(model, PROMPTS, positions=-1)[:, -1].argmax(-1)
    assert torch.equal(last[:, 0], expected)


# -- steering ------------------------------------------------------------------------


def test_steering_adds_exactly_the_vector_where_asked(model):
    layer, factor = 0, 3.0
    vector = torch.randn(model.hidden_size)
    base = direct(model, PROMPTS)
    # row 0 is the unpadded one, so its early positions see no steered token
    edit = lambda m: steer(m, layer, vector, factor, token_positions=[2, -1], batch_index=[0])  # noqa: E731
    steered = direct(model, PROMPTS, edit, start=layer + 1)
    seq = base["logits"].shape[1]
    expected = base["outputs"][layer].clone()
    expected[0, [2, seq - 1]] += factor * vector
    torch.testing.assert_close(steered["inputs"][layer + 1], expected, atol=ATOL, rtol=0)
    # several rows and several positions: every chosen row at every chosen position
    edit = lambda m: steer(m, layer, vector, factor, token_positions=[2, -1], batch_index=[0, 1])  # noqa: E731
    both = direct(model, PROMPTS, edit, start=layer + 1)
    expected = base["outputs"][layer].clone()
    expected[:, [2, seq - 1]] += factor * vector
    torch.testing.assert_close(both["inputs"][layer + 1], expected, atol=ATOL, rtol=0)
    # the logits move in the steered row, from the first steered position on, and nowhere else
    torch.testing.assert_close(steered["logits"][1], base["logits"][1], atol=0, rtol=0)
    torch.testing.assert_close(steered["logits"][0, :2], base["logits"][0, :2], atol=0, rtol=0)
    assert not torch.allclose(steered["logits"][0, 2], base["logits"][0, 2])
    assert not torch.allclose(steered["logits"][0, -1], base["logits"][0, -1])


def test_steering_the_last_layer_moves_the_logits_by_the_projection(model):
    vector = torch.randn(model.hidden_size)
    base = direct(model, PROMPTS)
    steered = direct(model, PROMPTS, lambda m: steer(m, -1, vector, -2.0, batch_index=0), start=model.num_layers)
    shifted = base["outputs"][-1].clone()
    shifted[0] += -2.0 * vector
    with torch.no_grad():
        expected = model.project_on_vocab(shifted)
    torch.testing.assert_close(steered["logits"], expected, atol=1e-4, rtol=0)
    assert not torch.allclose(steered["logits"][0], base["logits"][0])


def test_steering_several_layers_in_any_order(model):
    vector = torch.randn(model.hidden_size)
    layers = list(range(model.num_layers))
    end = model.num_layers
    forward = direct(model, PROMPTS, lambda m: steer(m, layers, vector), start=end)
    backward = direct(model, PROMPTS, lambda m: steer(m, layers[::-1], vector), start=end)
    torch.testing.assert_close(forward["logits"], backward["logits"], atol=0, rtol=0)
    # a layer listed twice is steered once
    once = direct(model, PROMPTS, lambda m: steer(m, 0, vector), start=1)
    twice = direct(model, PROMPTS, lambda m: steer(m, [0, 0], vector), start=1)
    torch.testing.assert_close(twice["inputs"][1], once["inputs"][1], atol=0, rtol=0)
    assert not torch.allclose(forward["logits"], once["logits"])


# -- skipping blocks -----------------------------------------------------------------


def test_skipping_with_identity_hands_the_stream_on(model):
    base = direct(model, PROMPTS)
    end = model.num_layers - 2
    skipped = direct_after_skip(model, 0, end)
    torch.testing.assert_close(skipped["input"], base["inputs"][0], atol=0, rtol=0)
    # skipping through the last block leaves the final norm the stream entering start
    with torch.no_grad(), model.trace(PROMPTS):
        skip_layers(model, 1, -1)
        logits = model.logits.save()
    with torch.no_grad():
        expected = model.project_on_vocab(base["inputs"][1])
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=0)
    assert not torch.allclose(logits, base["logits"], atol=1e-3)


def test_skipping_with_a_tensor_hands_it_on(model):
    base = direct(model, PROMPTS)
    replacement = torch.randn_like(base["inputs"][0])
    skipped = direct_after_skip(model, 0, model.num_layers - 2, replacement)
    torch.testing.assert_close(skipped["input"], replacement, atol=0, rtol=0)


def direct_after_skip(model, start, end, with_=None):
    found = {}
    with torch.no_grad(), model.trace(PROMPTS):
        skip_layers(model, start, end, with_)
        found["input"] = model.layers[end + 1].layer_input.clone()
    return found


# -- closest tokens ------------------------------------------------------------------


@pytest.mark.parametrize("using, matrix", [("unembedding", "lm_head"), ("embedding", "embed_tokens")])
def test_closest_tokens_are_the_rows_most_aligned(model, using, matrix):
    weight = getattr(model, matrix).weight.detach()
    ids = torch.tensor([7, 42])
    found = topk_closest_tokens(model, 5.0 * weight[ids], k=3, using=using)
    assert found.indices.shape == found.values.shape == (2, 3)
    assert torch.equal(found.indices[:, 0], ids)
    torch.testing.assert_close(found.values[:, 0], torch.ones(2), atol=1e-5, rtol=0)
    cosine = torch.nn.functional.cosine_similarity(weight[ids[0]][None].float(), weight.float(), dim=-1)
    torch.testing.assert_close(found.values[0], cosine.topk(3).values, atol=1e-5, rtol=0)


# -- prompts with targets ------------------------------------------------------------


def test_run_prompts_tracks_each_targets_probability_through_an_edit(model):
    prompts = [
        Prompt.from_strings(PROMPTS[0], {"city": "Paris", "other": ["London", " Rome"]}, model),
        Prompt.from_strings(PROMPTS[1], {"city": ["Paris"]}, model.tokenizer, both_spacings=False),
    ]
    first = model.tokenizer("Paris", add_special_tokens=False)["input_ids"][0]
    assert prompts[1].targets == {"city": [first]}
    assert first in prompts[0].targets["city"] and len(set(prompts[0].targets["other"])) == len(prompts[0].targets["other"])
    assert prompts[0].target_strings == {"city": ["Paris"], "other": ["London", " Rome"]}

    vector = torch.randn(model.hidden_size) * 4
    edit = lambda m: steer(m, 0, vector)  # noqa: E731
    for with_edit in (None, edit):
        results = run_prompts(model, prompts, edit=with_edit, batch_size=1, progress=False)
        # batch_size=1 runs each prompt alone
        probs = [next_token_probs(model, prompt.text, edit=with_edit)[0] for prompt in prompts]
        for prompt, result, row in zip(prompts, results, probs):
            assert set(result) == set(prompt.targets)
            for name, ids in prompt.targets.items():
                assert result[name] == pytest.approx(row[ids].sum().item(), abs=1e-6)
    plain = run_prompts(model, prompts, progress=False)
    edited = run_prompts(model, prompts, edit=edit, progress=False)
    assert plain[0]["city"] != pytest.approx(edited[0]["city"], abs=1e-7)


def test_the_model_methods_are_the_toolkit_functions(tiny_model):
    # earlier nnterp users call model.steer(...) and model.skip_layers(...): the same edits
    model = tiny_model("llama")
    vector = torch.randn(model.hidden_size, generator=torch.Generator().manual_seed(0))
    runs = []
    for edit in (
        lambda: None,
        lambda: steer(model, [0, 1], vector, 2.0, token_positions=-1),
        lambda: model.steer([0, 1], vector, 2.0, token_positions=-1),
        lambda: skip_layers(model, 0, 1),
        lambda: model.skip_layers(0, 1),
    ):
        with torch.no_grad(), model.trace(["Hello world", "The cat"]):
            edit()
            runs.append(model.logits.save())
    plain, steered, steered_method, skipped, skipped_method = runs
    assert torch.equal(steered, steered_method) and torch.equal(skipped, skipped_method)
    assert not torch.allclose(steered, plain) and not torch.allclose(skipped, plain)


def test_logit_lens_runs_remotely_as_it_runs_here(tiny_model):
    # remote="local" ships the trace as a remote backend would, the family's classes by value
    model = tiny_model("gemma2")
    assert torch.equal(logit_lens(model, PROMPTS), logit_lens(model, PROMPTS, remote="local"))
