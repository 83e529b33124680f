"""The toolkit's argument handling, drawn by hypothesis: every call gives what plain torch hooks give, or refuses by name.

Each test draws the arguments a hurried researcher might pass (block indices
in and out of range, positions, batch sizes, prompts as strings, id lists,
padded tensors with their mask or the tokenizer's encoding, mixed lengths,
either padding side) and asserts one of two outcomes: the call returns what a
direct computation gives (forward hooks on the HF modules, each prompt run
alone), or it raises ``InvalidArgument`` naming the argument, when the
arguments are out of range. Never another exception, never another block's
result.
"""

from __future__ import annotations

import functools

import nnterp  # noqa: F401 - before any transformers.models module
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nnterp import InvalidArgument, StandardizedTransformer
from nnterp.toolkit import cache_values, logit_lens, skip_layers, steer
from nnterp_conformance import tiny_checkpoint

TEXTS = ("The Eiffel Tower is in", "Hello", "one two three four five six", "a b")
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@functools.cache
def loaded(name: str) -> StandardizedTransformer:
    model = StandardizedTransformer(tiny_checkpoint(name))
    with model.trace("warm"):  # the first trace loads the real weights in place of the meta ones
        model.logits.save()
    return model


# -- direct computations: plain torch on the HF modules, one prompt at a time -------------


def _alone(model, ids: list[int], edit=None) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Every block's output and the logits of ``ids`` run alone; ``edit(layer, output)`` may replace a block's output."""
    outputs: list[torch.Tensor] = []
    handles = []
    for index in range(model.num_layers):

        def hook(module, args, output, index=index):
            if edit is not None:
                output = edit(index, args[0], output)
            outputs.append(output)
            return output

        handles.append(model.layers[index]._module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            logits = model._module(input_ids=torch.tensor([ids])).logits
    finally:
        for handle in handles:
            handle.remove()
    return [output[0] for output in outputs], logits[0]


def _project(model, hidden: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.lm_head._module(model.norm._module(hidden)).float().softmax(-1)


# -- drawing prompts ------------------------------------------------------------------------


@st.composite
def prompt_batches(draw):
    """(the prompts as the caller passes them, each prompt's ids, the tokenizer's padding side)."""
    texts = draw(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=3))
    side = draw(st.sampled_from(["left", "right"]))
    form = draw(st.sampled_from(["strings", "string", "id lists", "tensor", "encoding"]))
    return texts, side, form


def _as_given(model, texts: list[str], side: str, form: str):
    tokenizer = model.tokenizer
    tokenizer.padding_side = side
    ids = [tokenizer(text)["input_ids"] for text in texts]
    if form == "string":
        return texts[0], ids[:1]
    if form == "strings":
        return texts, ids
    if form == "id lists":
        return ids, ids
    encoding = tokenizer(texts, padding=True, return_tensors="pt")
    if form == "encoding":
        return encoding, ids
    return {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}, ids


@pytest.fixture(autouse=True)
def _padding_side_restored():
    yield
    for name in ("gpt2", "llama"):
        loaded(name).tokenizer.padding_side = "left"


def _refused(error: InvalidArgument, argument: str) -> None:
    assert isinstance(error, InvalidArgument)
    assert f"({argument}=" in str(error), str(error)


# -- logit_lens ------------------------------------------------------------------------------


@EXAMPLES
@given(name=st.sampled_from(["gpt2", "llama"]), batch=prompt_batches(), position=st.integers(-9, 8))
def test_logit_lens_is_each_prompts_own_lens_or_refuses(name, batch, position):
    model = loaded(name)
    given_prompts, ids = _as_given(model, *batch)
    shortest = min(len(row) for row in ids)
    inside = -shortest <= position < shortest
    try:
        lens = logit_lens(model, given_prompts, positions=position, engine="nnsight")
    except InvalidArgument as error:
        assert not inside, f"position {position} lies in every prompt, yet was refused: {error}"
        _refused(error, "positions")
        return
    assert inside, f"position {position} lies outside a prompt of {shortest} tokens, yet logit_lens returned"
    assert lens.shape == (len(ids), model.num_layers, model.vocab_size)
    for row, prompt in enumerate(ids):
        outputs, _ = _alone(model, prompt)
        for layer, hidden in enumerate(outputs):
            torch.testing.assert_close(lens[row, layer], _project(model, hidden[position]), rtol=1e-4, atol=1e-5)


# -- steer ----------------------------------------------------------------------------------


@EXAMPLES
@given(
    name=st.sampled_from(["gpt2", "llama"]),
    batch=prompt_batches(),
    layers=st.lists(st.integers(-5, 5), min_size=1, max_size=3),
    factor=st.floats(-4, 4, allow_nan=False),
)
def test_steer_edits_the_blocks_named_or_refuses(name, batch, layers, factor):
    model = loaded(name)
    texts, _, form = batch
    # the user's own trace pads as the tokenizer does, and nnsight positions a padded row only when that is the left
    given_prompts, ids = _as_given(model, texts, "left", form)
    vector = torch.linspace(-1, 1, model.hidden_size)
    inside = all(-model.num_layers <= layer < model.num_layers for layer in layers)
    try:
        with torch.no_grad(), model.trace(given_prompts):
            steer(model, layers, vector, factor, token_positions=-1)
            last = model.logits[:, -1].save()
    except InvalidArgument as error:
        assert not inside, f"layers {layers} are all blocks of the model, yet were refused: {error}"
        _refused(error, "layers")
        return
    assert inside, f"layers {layers} name blocks a {model.num_layers}-block model lacks, yet steer ran"
    chosen = {layer % model.num_layers for layer in layers}

    def edit(index, hidden_in, output):
        if index in chosen:
            output = output.clone()
            output[:, -1] += factor * vector
        return output

    for row, prompt in enumerate(ids):
        _, logits = _alone(model, prompt, edit)
        torch.testing.assert_close(last[row], logits[-1], rtol=1e-4, atol=1e-4)


@EXAMPLES
@given(name=st.sampled_from(["gpt2", "llama"]), start=st.integers(-5, 5), end=st.integers(-5, 5))
def test_skip_layers_skips_the_blocks_named_or_refuses(name, start, end):
    model = loaded(name)
    n = model.num_layers
    prompt = model.tokenizer(TEXTS[0])["input_ids"]
    valid = -n <= start < n and -n <= end < n and start % n <= end % n
    try:
        with torch.no_grad(), model.trace(TEXTS[0]):
            skip_layers(model, start, end)
            last = model.logits[:, -1].save()
    except InvalidArgument as error:
        assert not valid, f"skip_layers({start}, {end}) names blocks {start % n} to {end % n}, yet was refused: {error}"
        assert "(start=" in str(error) or "(end=" in str(error), str(error)
        return
    assert valid, f"skip_layers({start}, {end}) on a {n}-block model ran"
    skipped = range(start % n, end % n + 1)
    _, logits = _alone(model, prompt, lambda index, hidden_in, output: hidden_in if index in skipped else output)
    torch.testing.assert_close(last[0], logits[-1], rtol=1e-4, atol=1e-4)


# -- cache_values -------------------------------------------------------------------------


@EXAMPLES
@given(name=st.sampled_from(["gpt2", "llama"]), batch=prompt_batches(), layer=st.integers(-5, 5), batch_size=st.integers(-1, 3))
def test_cache_values_reads_each_prompts_own_values_or_refuses(name, batch, layer, batch_size):
    model = loaded(name)
    given_prompts, ids = _as_given(model, *batch)
    n = model.num_layers
    layer_inside, size_inside = -n <= layer < n, batch_size >= 1
    try:
        cache = cache_values(model, given_prompts, f"layers.{layer}.layer_output", batch_size=batch_size, progress=False)
    except (InvalidArgument, KeyError) as error:
        assert not (layer_inside and size_inside), f"layer {layer}, batch_size {batch_size} refused: {error}"
        if not size_inside:
            _refused(error, "batch_size")
        else:
            assert isinstance(error, KeyError) and f"{n} layers" in str(error), str(error)
        return
    assert layer_inside and size_inside, f"layer {layer}, batch_size {batch_size} on {n} blocks ran"
    values = cache[f"layers.{layer}.layer_output"]
    mask = cache.attention_mask.bool()
    for row, prompt in enumerate(ids):
        outputs, _ = _alone(model, prompt)
        assert mask[row].sum() == len(prompt)
        # left-padded whatever the tokenizer's side: the real tokens end the row
        assert mask[row, -len(prompt) :].all()
        torch.testing.assert_close(values[row][mask[row]], outputs[layer % n], rtol=1e-4, atol=1e-5)
