"""cache_values' arguments: prompts as strings or token ids on either padding side, and every refusal before the model runs.

The right answers are the block outputs plain torch forward hooks on the
HuggingFace modules give for each prompt run alone; the refusals are
``InvalidArgument`` naming the argument and the value given, with no forward run.
"""

import nnterp  # noqa: F401 - before any transformers.models module
import pytest
import torch
from nnterp import InvalidArgument, ToolkitInsideTrace
from nnterp.toolkit import cache_values

PROMPTS = ["The Eiffel Tower is in the city of", "Hello"]  # of different lengths: one row is padded
NAMES = ["layers.0.layer_output", "layers.-1.layer_output"]


@pytest.fixture(scope="module")
def warm(tiny_model):
    """``warm(family)``: the model, its real weights loaded by a first trace (hooks on its modules need them)."""

    def get(family):
        model = tiny_model(family)
        with torch.no_grad(), model.trace("warm"):
            model.logits.save()
        return model

    return get


def alone(model, ids):
    """Each block's output for ``ids`` run alone through the HF model, by forward hooks: ``[num_layers, seq, hidden]``."""
    outputs, handles = [], []
    for index in range(model.num_layers):
        hook = lambda _module, _args, output: outputs.append(output[0] if isinstance(output, tuple) else output)  # noqa: E731
        handles.append(model.layers[index]._module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model._module(input_ids=torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack([output[0] for output in outputs])


class right_padding:
    """The model's tokenizer padding on the right inside the block (restored after)."""

    def __init__(self, model):
        self.tokenizer = model.tokenizer

    def __enter__(self):
        self.side, self.tokenizer.padding_side = self.tokenizer.padding_side, "right"

    def __exit__(self, *exc):
        self.tokenizer.padding_side = self.side


def assert_each_prompt_alone(model, cache, ids):
    """At each prompt's real tokens (its last ones: left-padded), the cached values are those of the prompt run alone."""
    for row, prompt in enumerate(ids):
        assert cache.attention_mask[row].sum() == len(prompt)
        assert cache.input_ids[row, -len(prompt) :].tolist() == prompt  # position -1 is the prompt's last token
        expected = alone(model, prompt)
        for name in NAMES:
            layer = int(name.split(".")[1]) % model.num_layers
            torch.testing.assert_close(cache[name][row, -len(prompt) :], expected[layer], msg=f"{name}, prompt {row}")


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("engine", ["hooks", "nnsight"])
def test_a_batch_gives_each_prompt_its_values_alone_on_either_padding_side(warm, family, side, engine):
    # gpt2 learns its positions: a right-padding tokenizer left GPT-2's short rows at shifted positions
    model = warm(family)
    ids = [model.tokenizer(prompt)["input_ids"] for prompt in PROMPTS]
    with right_padding(model) if side == "right" else torch.no_grad():
        cache = cache_values(model, PROMPTS, NAMES, batch_size=2, progress=False, engine=engine)
        assert model.tokenizer.padding_side == side  # the caller's tokenizer as it was
    assert_each_prompt_alone(model, cache, ids)


def test_token_ids_in_every_form_read_as_their_strings(warm):
    model = warm("gpt2")
    ids = [model.tokenizer(prompt)["input_ids"] for prompt in PROMPTS]
    with right_padding(model):
        encoding = model.tokenizer(PROMPTS, padding=True, return_tensors="pt")  # padded on the right, with its mask
    assert encoding["attention_mask"][1, -1] == 0
    for given in (ids, encoding, {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}):
        cache = cache_values(model, given, NAMES, batch_size=1, progress=False)
        assert_each_prompt_alone(model, cache, ids)
    # one prompt: a list of ids, a [seq] tensor, a [1, seq] tensor
    for given in (ids[0], torch.tensor(ids[0]), torch.tensor([ids[0]])):
        assert_each_prompt_alone(model, cache_values(model, given, NAMES, progress=False), ids[:1])


def forwards(model):
    """A list that counts the model's forwards while the returned handle is held."""
    calls = []
    return calls, model._module.register_forward_pre_hook(lambda *_: calls.append(1))


@pytest.mark.parametrize(
    ("arguments", "argument", "shown"),
    [
        ({"batch_size": 0}, "batch_size", "0"),
        ({"batch_size": -2}, "batch_size", "-2"),
        ({"batch_size": 2.5}, "batch_size", "2.5"),
        ({"stop_at_layer": 3}, "stop_at_layer", "3"),  # 3 blocks: 0 to 2
        ({"stop_at_layer": -4}, "stop_at_layer", "-4"),  # once wrapped around onto block 2
        ({"stop_at_layer": 0}, "stop_at_layer", "0"),  # the forward would end before layers.-1
        ({"names": []}, "names", "[]"),
        ({"names": 3}, "names", "expected a standard name or a list of them"),
        ({"names": ["layers.0.layer_output", None]}, "names", "expected a standard name"),
        ({"dtype": torch.int8}, "dtype", "torch.int8"),
        ({"engine": "fast"}, "engine", "'fast'"),
        ({"prompts": []}, "prompts", "[]"),
        ({"prompts": ["Hello", [1, 2]]}, "prompts", "['Hello', [1, 2]]"),
        ({"prompts": torch.ones(2, 3)}, "prompts", "tensor"),
    ],
)
def test_arguments_out_of_range_are_refused_by_name_before_the_model_runs(warm, arguments, argument, shown):
    model = warm("gpt2")
    call = {"prompts": PROMPTS, "names": NAMES, "progress": False} | arguments
    calls, handle = forwards(model)
    try:
        with pytest.raises(InvalidArgument) as raised:
            cache_values(model, call.pop("prompts"), call.pop("names"), **call)
    finally:
        handle.remove()
    message = str(raised.value)
    assert raised.value.argument == argument and f"cache_values({argument}=" in message and shown in message, message
    assert not calls


def test_a_block_index_past_the_model_names_how_many_it_has(warm):
    model = warm("gpt2")
    for name in ("layers.7.layer_output", "layers.-4.layer_output"):
        with pytest.raises(KeyError, match=rf"{name}.*the model has 3 layers"):
            cache_values(model, PROMPTS, [name], progress=False)


def test_a_negative_stop_at_layer_counts_from_the_end(warm):
    model = warm("gpt2")
    reached, handle = [], model.layers[2]._module.register_forward_hook(lambda *_: reached.append(1))
    try:
        early = cache_values(model, PROMPTS, ["layers.1.layer_output"], stop_at_layer=-2, progress=False)
    finally:
        handle.remove()
    assert not reached  # block 2 never ran
    full = cache_values(model, PROMPTS, ["layers.1.layer_output"], progress=False)
    assert torch.equal(early["layers.1.layer_output"], full["layers.1.layer_output"])


def test_called_inside_a_trace_it_says_so(warm):
    model = warm("gpt2")
    with pytest.raises(ToolkitInsideTrace, match=r"cache_values\(\) runs the model itself"):
        with torch.no_grad(), model.trace("Hello"):
            model.layers[0].layer_output.save()
            cache_values(model, PROMPTS, NAMES, progress=False)
