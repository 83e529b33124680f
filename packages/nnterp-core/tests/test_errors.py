"""Every wrong use is refused in the user's words, before the model runs where it can be, and leaves nothing half-done.

Each case asserts the error's type, that the message names the standard value
(or the prompt, the path) as the user wrote it, whether the model ran (a
forward pre-hook on the root module), and that a correct trace afterwards
gives exactly the logits it gave before.
"""

from __future__ import annotations

import contextlib
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nnterp import Attention, EProperty, StandardizedTransformer, Unavailable
from nnterp.components.layer import Layer, returned_tuple
from nnterp.errors import (
    CheckpointNotFound,
    FamilyNotFound,
    GradientOutsideBackward,
    InvalidPrompt,
    NeverRan,
    OtherComponent,
    OutOfOrder,
    UnknownValue,
    WriteMismatch,
)
from nnterp.families import default
from nnterp_conformance import tiny_checkpoint

pytestmark = pytest.mark.xdist_group("llama")
PROMPT = "The Eiffel Tower is in"
DRAWN = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def model(tiny_model):
    return tiny_model("llama")


@pytest.fixture(scope="module")
def reference(model):
    """The logits of PROMPT before any error: what every later correct trace must still give."""
    return _logits(model)


def _logits(model, prompt=PROMPT, **kwargs):
    with torch.no_grad(), model.trace(prompt, **kwargs):
        logits = model.logits.save()
    return logits


@contextlib.contextmanager
def refused(model, reference, error, *, runs=False, **kwargs):
    """The block raises ``error`` (message matching ``match=``), the model runs only if ``runs``, and nothing changes."""
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(error, **kwargs) as raised:
            yield raised
    finally:
        hook.remove()
    if not runs:
        assert calls == [], "the model ran before the error"
    assert torch.equal(_logits(model), reference), "a correct trace after the error gives other logits"


# -- loading -----------------------------------------------------------------------


def test_a_missing_directory_is_not_called_a_malformed_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointNotFound, match=r"'./checkpoints/llama-typo' is no directory .*typo"):
        StandardizedTransformer("./checkpoints/llama-typo")


def test_a_directory_without_a_config_is_said_so(tmp_path):
    (tmp_path / "weights").mkdir()
    with pytest.raises(CheckpointNotFound, match="without a config.json"):
        StandardizedTransformer(str(tmp_path / "weights"))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointNotFound, match="is a file, not a checkpoint"):
        StandardizedTransformer(tmp_path / "model.safetensors")


@given(name=st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,20}[A-Za-z0-9])?(/[A-Za-z0-9]([A-Za-z0-9_.-]{0,20}[A-Za-z0-9])?)?", fullmatch=True))
@settings(max_examples=30, deadline=None)
def test_plausible_hub_ids_go_on_to_transformers(name):
    from nnterp._loading import check_checkpoint

    if os.path.exists(name) or "--" in name or ".." in name:
        return
    check_checkpoint(name)  # raises nothing: transformers resolves it, or says it cannot reach the hub


def test_a_family_in_a_package_not_installed_names_the_package(monkeypatch):
    from nnterp import registry

    path = tiny_checkpoint("mamba")
    empty = registry.Catalog(modules={}, model_types={})
    monkeypatch.setattr(registry, "indexed", lambda: empty)
    monkeypatch.setattr(registry, "catalog", lambda: empty)
    with pytest.raises(FamilyNotFound, match=r"nnterp-recurrent package, which is not installed; install it"):
        StandardizedTransformer(path)


# -- the order rule ---------------------------------------------------------------


@given(data=st.data())
@DRAWN
def test_a_read_after_a_later_value_names_both_and_the_rule(model, reference, data):
    later = data.draw(st.integers(0, model.num_layers - 1))
    earlier = data.draw(st.integers(0, later))
    with refused(model, reference, OutOfOrder, runs=True) as raised:
        with model.trace(PROMPT):
            model.layers[later].layer_output.save()
            model.layers[earlier].layer_input.save()
    message = str(raised.value)
    assert f"layers[{earlier}].layer_input was read after layers[{later}].layer_output" in message
    assert "in the order the forward computes them" in message and "tracer.invoke" in message


def test_a_write_out_of_order_says_written(model, reference):
    shape = _shape_of(model, 0, "self_attn.attention_output")
    with refused(model, reference, OutOfOrder, runs=True, match=r"layers\[0\].self_attn.attention_output was written after layers\[1\].layer_output"):
        with torch.no_grad(), model.trace(PROMPT):
            model.layers[1].layer_output.save()
            model.layers[0].self_attn.attention_output = torch.zeros(shape)


class CachedKeys(Attention):
    """A value read where the cache joins the keys to earlier ones: on a branch that a call without a cache skips."""

    @EProperty("source.cache_update_0.output", "keys joined to the cache", select=0)
    def cached_keys(self, value):
        return value


def test_a_value_on_a_branch_not_taken_says_it_never_ran_and_why():
    model = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager", envoys={"layers.*.self_attn": CachedKeys})
    reference = _logits(model)
    with torch.no_grad(), model.trace(PROMPT):
        keys = model.layers[0].self_attn.cached_keys.save()
    assert keys.shape[1] == model.layers[0].self_attn.num_kv_heads
    with refused(model, reference, NeverRan, runs=True) as raised:
        with torch.no_grad(), model.trace(PROMPT, use_cache=False):
            model.layers[0].self_attn.cached_keys.save()
    message = str(raised.value)
    assert "layers[0].self_attn.cached_keys was read but never computed on this call" in message
    assert "under `if cache is not None:`" in message and "LlamaAttention.forward" in message


def test_a_value_inside_a_skipped_block_never_ran(model, reference):
    with refused(model, reference, NeverRan, runs=True, match=r"layers\[1\].self_attn.attention_output .*layers\[1\].self_attn itself did not run"):
        with torch.no_grad(), model.trace(PROMPT):
            model.layers[1].skip(model.layers[1].layer_input)
            model.layers[1].self_attn.attention_output.save()


# -- names ------------------------------------------------------------------------------


@given(index=st.integers(-50, 50))
@DRAWN
def test_an_index_out_of_range_is_an_index_error_with_the_count(model, index):
    count = model.num_layers
    if -count <= index < count:
        assert model.layers[index] is model.layers[index % count]
        return
    with pytest.raises(IndexError, match=rf"layers\[{index}\] is out of range: layers holds {count} blocks"):
        model.layers[index]


@pytest.mark.parametrize("name", ["router_logits", "expert_weights", "shared_expert_output"])
def test_router_values_on_a_dense_mlp_are_unavailable_with_the_reason(model, reference, name):
    assert not hasattr(model.layers[0].mlp, name)
    with refused(model, reference, OtherComponent, match=rf"layers\[0\].mlp.{name} is unavailable: this block's MLP is dense.*{name} belongs to Moe"):
        with model.trace(PROMPT):
            getattr(model.layers[0].mlp, name).save()
    with pytest.raises(Unavailable):  # an Unavailable as much as an AttributeError
        getattr(model.layers[0].mlp, name)


def test_a_sublayer_value_on_the_block_says_where_it_is(model):
    with pytest.raises(OtherComponent, match=r"read it as layers\[2\].self_attn.attention_output"):
        model.layers[2].attention_output


def _typos(name):
    return st.sampled_from(
        [name[:i] + name[i + 1 :] for i in range(1, len(name))]
        + [name[:i] + name[i + 1] + name[i] + name[i + 2 :] for i in range(1, len(name) - 1)]
    )


@given(data=st.data())
@DRAWN
def test_a_misspelled_value_suggests_the_standard_name(model, data):
    host, name = data.draw(st.sampled_from([("", "layer_output"), ("", "layer_input"), ("self_attn", "attention_probabilities"), ("mlp", "mlp_neurons")]))
    typo = data.draw(_typos(name))
    envoy = model.layers[1] if not host else getattr(model.layers[1], host)
    if typo in type(envoy).values():
        return
    with pytest.raises(UnknownValue) as raised:
        getattr(envoy, typo)
    assert not hasattr(envoy, typo)
    assert f"has no value, module or attribute {typo!r}" in str(raised.value) and name in str(raised.value)


# -- writes -----------------------------------------------------------------------------

WRITABLE = ["layer_input", "layer_output", "self_attn.attention_output", "mlp.mlp_output", "self_attn.attention_probabilities",
            "self_attn.attention_scores", "self_attn.attention_queries", "self_attn.attention_keys", "mlp.mlp_neurons"]


def _shape_of(model, layer, name):
    with torch.no_grad(), model.trace(PROMPT):
        value = _get(model.layers[layer], name).save()
    return tuple(value.shape)


def _get(envoy, name):
    for part in name.split("."):
        envoy = getattr(envoy, part)
    return envoy


def _set(envoy, name, value):
    *hosts, last = name.split(".")
    for part in hosts:
        envoy = getattr(envoy, part)
    setattr(envoy, last, value)


@given(data=st.data())
@DRAWN
def test_a_write_of_the_wrong_shape_is_refused_before_the_model_runs(model, reference, data):
    layer = data.draw(st.integers(0, model.num_layers - 1))
    name = data.draw(st.sampled_from(WRITABLE))
    shape = list(_shape_of(model, layer, name))
    change = data.draw(st.sampled_from(["size", "drop", "add"]))
    if change == "size":
        axis = data.draw(st.integers(0, len(shape) - 1))
        delta = data.draw(st.sampled_from([-1, 1, 5]))
        shape[axis] += delta if shape[axis] + delta >= 1 else 1
    elif change == "drop":
        shape.pop(data.draw(st.integers(0, len(shape) - 1)))
    else:
        shape.insert(data.draw(st.integers(0, len(shape))), 2)
    value = torch.zeros(shape)
    with refused(model, reference, WriteMismatch) as raised:
        with torch.no_grad(), model.trace(PROMPT):
            _set(model.layers[layer], name, value)
    message = str(raised.value)
    assert message.startswith(f"layers[{layer}].{name} = a tensor of shape [{', '.join(map(str, shape))}]")
    assert "it takes" in message


@given(name=st.sampled_from(WRITABLE), dtype=st.sampled_from([torch.float64, torch.float16, torch.bfloat16]))
@DRAWN
def test_a_write_in_another_dtype_names_the_models(model, reference, name, dtype):
    shape = _shape_of(model, 1, name)
    with refused(model, reference, WriteMismatch, runs=True, match=rf"layers\[1\].{name} = .*the model computes it in float32.*\.to\(torch.float32\)"):
        with torch.no_grad(), model.trace(PROMPT):
            _set(model.layers[1], name, torch.zeros(shape, dtype=dtype))


def test_an_integer_pattern_is_refused_before_the_model_runs(model, reference):
    shape = _shape_of(model, 0, "self_attn.attention_probabilities")
    with refused(model, reference, WriteMismatch, match="floating-point"):
        with torch.no_grad(), model.trace(PROMPT):
            model.layers[0].self_attn.attention_probabilities = torch.zeros(shape, dtype=torch.long)


def test_a_right_write_still_lands(model, reference):
    shape = _shape_of(model, 1, "layer_output")
    with torch.no_grad(), model.trace(PROMPT):
        model.layers[1].layer_output = torch.zeros(shape)
        after = model.layers[2].layer_input.save()
    assert torch.equal(after, torch.zeros(shape))
    assert torch.equal(_logits(model), reference)


def test_a_write_that_fails_half_way_leaves_the_cache_it_was_handed(model, reference):
    from transformers import DynamicCache

    cache = DynamicCache(config=model._module.config)
    with torch.no_grad(), model.trace("The Eiffel Tower", cache=cache):
        pass
    length = cache.get_seq_length()
    keys = [layer.keys.clone() for layer in cache.layers]
    with refused(model, reference, WriteMismatch, runs=True):
        with torch.no_grad(), model.trace(" is in", cache=cache):
            model.layers[1].layer_output = torch.zeros(1, 3, model.hidden_size, dtype=torch.float64)
    assert cache.get_seq_length() == length
    assert all(torch.equal(layer.keys, saved) for layer, saved in zip(cache.layers, keys))


# -- gradients --------------------------------------------------------------------------


@given(layer=st.integers(0, 2), name=st.sampled_from(["layer_output", "layer_input", "self_attn.attention_output"]))
@DRAWN
def test_a_gradient_read_outside_backward_raises_with_the_form_that_works(model, reference, layer, name):
    with refused(model, reference, GradientOutsideBackward, runs=True) as raised:
        with model.trace(PROMPT):
            _get(model.layers[layer], name).grad.save()
    message = str(raised.value)
    assert f"layers[{layer}].{name}.grad is read outside a backward pass" in message
    assert "with metric.backward():" in message and "value.grad.save()" in message


def test_the_form_the_message_shows_works(model):
    with model.trace(PROMPT):
        value = model.layers[1].layer_output
        metric = model.logits[:, -1].sum()
        with metric.backward():
            gradient = value.grad.save()
    assert gradient is not None and gradient.shape[-1] == model.hidden_size


def test_under_no_grad_the_message_says_so(model, reference):
    with refused(model, reference, GradientOutsideBackward, runs=True, match="torch.no_grad"):
        with torch.no_grad(), model.trace(PROMPT):
            model.layers[1].layer_output.grad.save()


def test_parameters_and_plain_tensors_read_their_gradient_as_torch_does(model):
    plain = torch.zeros(3)
    stored = model.lm_head._module.weight.grad  # None, or what an earlier backward accumulated
    read = []
    with torch.no_grad(), model.trace(PROMPT):
        read.extend([model.lm_head._module.weight.grad, plain.grad])
        model.logits.save()
    assert read[0] is stored and read[1] is None


# -- prompts ----------------------------------------------------------------------------


@pytest.mark.parametrize("prompts", ["", ["Hello world", ""]])
def test_an_empty_prompt_is_refused_before_the_forward(model, reference, prompts):
    with refused(model, reference, InvalidPrompt, match=r"has no tokens"):
        with model.trace(prompts):
            model.layers[0].layer_output.save()


@given(data=st.data())
@DRAWN
def test_a_batch_mixing_strings_and_ids_is_refused(model, reference, data):
    ids = st.lists(st.integers(1, 100), min_size=1, max_size=4)
    batch = data.draw(st.lists(st.one_of(st.just("Hello world"), ids), min_size=2, max_size=4))
    if all(isinstance(prompt, str) for prompt in batch) or not any(isinstance(prompt, str) for prompt in batch):
        return
    with refused(model, reference, InvalidPrompt, match="mixes strings and token ids"):
        with model.trace(batch):
            model.layers[0].layer_output.save()


@given(data=st.data())
@DRAWN
def test_ids_outside_the_vocabulary_are_refused(model, reference, data):
    rows = model._module.get_input_embeddings().num_embeddings
    bad = data.draw(st.one_of(st.integers(rows, rows + 10_000), st.integers(-100, -1)))
    ids = data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=5))
    position = data.draw(st.integers(0, len(ids)))
    ids.insert(position, bad)
    with refused(model, reference, InvalidPrompt, match=rf"token id {bad} \(prompt 0, position {position}\) is outside the vocabulary"):
        with model.trace(torch.tensor([ids])):
            model.layers[0].layer_output.save()


def test_a_prompt_longer_than_learned_positions_is_refused(tiny_model):
    gpt2 = tiny_model("gpt2")
    positions = gpt2._module.config.n_positions
    with torch.no_grad(), gpt2.trace(torch.ones(1, positions, dtype=torch.long)):
        gpt2.logits.save()
    with refused(gpt2, _logits(gpt2), InvalidPrompt, match=rf"{positions + 1} tokens long.*{positions} positions"):
        with gpt2.trace(torch.ones(1, positions + 1, dtype=torch.long)):
            gpt2.layers[0].layer_output.save()


# -- skip -------------------------------------------------------------------------------


class StaleFlagLayer(Layer):
    """A family written when its blocks returned tuples, on a release whose blocks return the stream alone."""

    returns_tuple = True


def test_skip_packs_by_what_the_forward_returns_not_a_stale_flag():
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    assert returned_tuple(LlamaDecoderLayer) is False
    model = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager", envoys={"layers.*": StaleFlagLayer})
    with torch.no_grad(), model.trace(PROMPT):
        hidden = model.layers[0].layer_input * 2
        model.layers[0].skip(hidden)
        received = model.layers[1].layer_input.save()
        sent = hidden.save()
    assert torch.equal(received, sent)


def test_what_block_forwards_return_is_read_off_their_source():
    import importlib

    expected = {("gptj", "GPTJBlock"): False, ("bloom", "BloomBlock"): True, ("gpt2", "GPT2Block"): False, ("doge", "DogeDecoderLayer"): False}
    for (module, name), returns in expected.items():
        block = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name)
        assert returned_tuple(block) is returns, name
    assert default.FAMILY.envoys["layers.*"] is Layer
