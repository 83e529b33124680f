"""The read-only hooks path (``nnterp.toolkit._hooks``): the same tensors as a trace, chosen automatically, refused where unsound.

On six kinds of block: gpt2 (learned absolute positions, so left padding
needs the trace's position ids), llama (the default block), gemma2 (the
sandwich block), mixtral (a mixture of experts: its routing values are
token-flat and do not qualify), qwen3 (query/key norms) and bloom (the
residual added inside the attention and the MLP: their contributions are
operations inside the forward, so they do not qualify).
"""

import pytest
import torch
from nnterp.toolkit import _hooks as hooks
from nnterp.toolkit.cache import _host, block_order, cache_values, expand_names
from nnterp.toolkit.extraction import extract_values

#: three lengths, so batches of two are left-padded to a length neither batch has alone
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world", "a b c"]

#: per family, the block values read at a module boundary (the rest of a block's values are read inside a forward)
AT_BOUNDARY = {
    "gpt2": {"layer_input", "attention_norm_output", "self_attn.attention_output", "layer_mid", "mlp_norm_output",
             "mlp_input", "mlp.mlp_activation", "mlp.mlp_neurons", "mlp.mlp_output", "layer_output"},
    "llama": {"layer_input", "attention_norm_output", "self_attn.attention_output", "layer_mid", "mlp_norm_output",
              "mlp_input", "mlp.mlp_activation", "mlp.mlp_neurons", "mlp.mlp_output", "layer_output"},
    "gemma2": {"layer_input", "attention_norm_output", "self_attn.attention_output", "layer_mid", "mlp_norm_output",
               "mlp_input", "mlp.mlp_activation", "mlp.mlp_neurons", "mlp.mlp_output", "layer_output"},
    "mixtral": {"layer_input", "attention_norm_output", "self_attn.attention_output", "layer_mid", "mlp_norm_output",
                "mlp_input", "mlp.mlp_output", "layer_output"},
    "qwen3": {"layer_input", "attention_norm_output", "self_attn.attention_output", "layer_mid", "mlp_norm_output",
              "mlp_input", "mlp.mlp_activation", "mlp.mlp_neurons", "mlp.mlp_output", "layer_output"},
    "bloom": {"layer_input", "attention_norm_output", "layer_mid", "mlp_norm_output", "mlp_input",
              "mlp.mlp_activation", "mlp.mlp_neurons", "layer_output"},
}


def at_boundary(model):
    """Every available block value of block 0 that ``_hooks.boundary`` places at a module boundary."""
    block = model.layers[0]
    found = set()
    for value in block_order(block):
        host, name = _host(block, value)
        if getattr(type(host), name).reason(host) is None and not isinstance(hooks.boundary(host, name), str):
            found.add(value)
    return found


@pytest.mark.parametrize("family", sorted(AT_BOUNDARY))
def test_every_value_at_a_boundary_is_the_traced_tensor_bit_for_bit(tiny_model, family):
    model = tiny_model(family)
    qualifying = at_boundary(model)
    assert qualifying == AT_BOUNDARY[family]
    names = [f"layers.*.{value}" for value in sorted(qualifying)]
    hooked = cache_values(model, PROMPTS, names, batch_size=2, progress=False)
    traced = cache_values(model, PROMPTS, names, batch_size=2, progress=False, engine="nnsight")
    assert (hooked.engine, hooked.fallback) == ("hooks", None)
    assert traced.engine == "nnsight" and "engine='nnsight'" in traced.fallback
    assert list(hooked) == list(traced) and len(list(hooked)) == len(qualifying) * model.num_layers
    for name in hooked:
        assert hooked[name].shape == traced[name].shape and hooked[name].dtype == traced[name].dtype, name
        assert hooked[name].shape[:2] == hooked.attention_mask.shape, name
        assert torch.equal(hooked[name], traced[name]), name
    assert torch.equal(hooked.input_ids, traced.input_ids) and torch.equal(hooked.attention_mask, traced.attention_mask)


@pytest.mark.parametrize(
    ("family", "value", "why"),
    [
        ("llama", "self_attn.attention_probabilities", "inside a forward"),
        ("bloom", "self_attn.attention_output", "inside a forward"),
        ("mixtral", "mlp.router_logits", "TokenEProperty"),
        ("gpt2", "logits", "computed from what its location holds"),
    ],
)
def test_a_value_not_at_a_boundary_sends_the_call_to_the_trace(tiny_model, family, value, why):
    model = tiny_model(family)
    name = value if value == "logits" else f"layers.1.{value}"
    names = ["layers.0.layer_output", name]
    cache = cache_values(model, PROMPTS, names, batch_size=2, progress=False)
    assert cache.engine == "nnsight" and why in cache.fallback
    forced = cache_values(model, PROMPTS, names, batch_size=2, progress=False, engine="nnsight")
    for each in cache:
        assert torch.equal(cache[each], forced[each]), each
    with pytest.raises(ValueError, match="engine='hooks'"):
        cache_values(model, PROMPTS, names, progress=False, engine="hooks")


def test_left_padded_rows_keep_their_positions(tiny_model):
    # GPT-2 adds a learned position per token: without the trace's mask-derived position ids a padded row would shift
    model = tiny_model("gpt2")
    names = ["layers.*.layer_output"]
    batch = cache_values(model, PROMPTS, names, progress=False)
    assert batch.engine == "hooks" and not batch.attention_mask.all()
    for row, prompt in enumerate(PROMPTS):
        alone = cache_values(model, [prompt], names, progress=False)
        length = alone.attention_mask.shape[1]
        for index in range(model.num_layers):
            name = f"layers.{index}.layer_output"
            torch.testing.assert_close(batch[name][row, -length:], alone[name][0], atol=1e-5, rtol=1e-4)


def test_the_forward_ends_after_the_last_value_needed(tiny_model):
    model = tiny_model("llama")
    with torch.no_grad(), model.trace(PROMPTS):  # the first trace loads the weights, replacing the meta modules
        pass
    calls = []
    handles = [
        model.layers[-1]._module.register_forward_hook(lambda *_: calls.append("last block")),
        model.lm_head._module.register_forward_hook(lambda *_: calls.append("lm_head")),
    ]
    try:
        cache = cache_values(model, PROMPTS, ["layers.0.layer_output", "layers.1.mlp.mlp_output"], progress=False)
        assert cache.engine == "hooks" and calls == []
        cache_values(model, PROMPTS, [f"layers.{model.num_layers - 1}.layer_output"], progress=False)
        assert calls == ["last block"]
    finally:
        for handle in handles:
            handle.remove()


def test_dtype_and_device_are_those_of_the_traced_copy(tiny_model):
    model = tiny_model("qwen3")
    names = ["layers.*.layer_output", "layers.1.mlp.mlp_neurons"]
    hooked = cache_values(model, PROMPTS, names, batch_size=2, dtype=torch.bfloat16, progress=False)
    traced = cache_values(model, PROMPTS, names, batch_size=2, dtype=torch.bfloat16, progress=False, engine="nnsight")
    assert hooked.engine == "hooks"
    for name in hooked:
        assert hooked[name].dtype == torch.bfloat16 and hooked[name].device.type == "cpu"
        assert torch.equal(hooked[name], traced[name]), name


def test_extraction_writes_the_traced_rows(tiny_model, tmp_path):
    model = tiny_model("llama")
    texts = [*PROMPTS, "", "x y z w"]  # an empty text has no rows
    values = ["layers.*.layer_output", "layers.1.mlp.mlp_neurons"]
    hooked = extract_values(model, texts, values, tmp_path / "hooks", batch_size=2, shard_tokens=7, progress=False)
    traced = extract_values(model, texts, values, tmp_path / "trace", batch_size=2, shard_tokens=7, progress=False, engine="nnsight")
    assert (hooked.engine, traced.engine) == ("hooks", "nnsight")
    assert hooked.manifest["shards"] == traced.manifest["shards"]
    for one, other in zip(hooked, traced, strict=True):
        assert one.keys() == other.keys()
        for name in one:
            assert torch.equal(one[name], other[name]), name
    inside = extract_values(model, texts, ["layers.1.self_attn.attention_head_outputs"], tmp_path / "inside", progress=False)
    assert inside.engine == "nnsight" and "inside a forward" in inside.fallback


def test_calls_the_hooks_cannot_serve_are_planned_for_the_trace(tiny_model):
    model = tiny_model("gpt2")
    hosts = [_host(model, name) for name in expand_names(model, ["layers.*.layer_output"])]
    assert isinstance(hooks.plan(model, hosts), list)
    assert "remote" in hooks.plan(model, hosts, remote=True)
    with pytest.raises(ValueError, match="engine="):
        hooks.choose(model, hosts, "fast")
    with model.edit(inplace=True):
        model.layers[0].layer_output[:] = 0
    try:
        assert "edits" in hooks.plan(model, hosts)
        edited = cache_values(model, PROMPTS, ["layers.0.layer_output"], progress=False)
        assert edited.engine == "nnsight" and not edited["layers.0.layer_output"].any()
    finally:
        model.clear_edits()
    assert cache_values(model, PROMPTS, ["layers.0.layer_output"], progress=False).engine == "hooks"


def test_only_an_identity_preprocess_qualifies():
    def documented(self, value):
        """A docstring changes no bytecode."""
        return value

    assert hooks._returns_its_value(documented)
    assert hooks._returns_its_value(lambda self, value: value)
    assert not hooks._returns_its_value(lambda self, value: self)
    assert not hooks._returns_its_value(lambda self, value: value.float())
    assert not hooks._returns_its_value(lambda self, value: value[0])


@pytest.mark.parametrize("family", ["gpt2", "gemma2", "bloom"])
def test_the_logit_lens_on_hooks_is_the_traced_lens(tiny_model, family):
    from nnterp.toolkit.lens import logit_lens

    model = tiny_model(family)
    for options in ({}, {"positions": -1, "inverse": True}, {"positions": [0, -1]}):
        hooked = logit_lens(model, PROMPTS, engine="hooks", **options)  # refuses rather than trace
        traced = logit_lens(model, PROMPTS, engine="nnsight", **options)
        hooked, traced = (hooked, traced) if isinstance(hooked, tuple) else ((hooked,), (traced,))
        for one, other in zip(hooked, traced, strict=True):
            assert one.shape == other.shape and torch.equal(one, other), options
    assert torch.equal(logit_lens(model, PROMPTS), logit_lens(model, PROMPTS, engine="nnsight"))  # auto takes the hooks


def test_the_logit_lens_traces_a_projection_of_the_familys_own(tiny_model):
    from nnterp.toolkit.lens import _plain_projection, logit_lens

    model = tiny_model("llama")
    assert _plain_projection(model)
    family = model.family
    model.family = family.replace(project_on_vocab=lambda model, hidden: model.lm_head(model.norm(hidden)))
    try:
        assert not _plain_projection(model)
        with pytest.raises(ValueError, match="its own function"):
            logit_lens(model, PROMPTS, engine="hooks")
        assert logit_lens(model, PROMPTS).shape[:2] == (len(PROMPTS), model.num_layers)
    finally:
        model.family = family


def test_a_kept_plan_follows_the_proofs_refutations_and_a_reason_a_function_decides(tiny_model):
    from nnterp.descriptors import REFUTED, withdraw
    from nnterp.errors import Unavailable

    model = tiny_model("gpt2")
    names = ["layers.0.layer_output"]
    assert cache_values(model, PROMPTS, names, progress=False).engine == "hooks"  # the plan is kept
    block = model.layers[0]
    withdraw(block, "layer_output", "withdrawn by this test")
    try:
        with pytest.raises(Unavailable, match="withdrawn by this test"):
            cache_values(model, PROMPTS, names, progress=False)
    finally:
        block.__dict__.pop(REFUTED)
    assert cache_values(model, PROMPTS, names, progress=False).engine == "hooks"
    descriptor, gone = type(block).layer_output, []
    kept = descriptor._unavailable
    descriptor._unavailable = lambda envoy: gone[0] if gone else None
    model.__dict__.pop("_nnterp_value_plans")  # plans made before the class changed (classes are fixed once loaded)
    try:
        assert cache_values(model, PROMPTS, names, progress=False).engine == "hooks"
        gone.append("gone since the last call")
        with pytest.raises(Unavailable, match="gone since the last call"):
            cache_values(model, PROMPTS, names, progress=False)
    finally:
        descriptor._unavailable = kept
    assert cache_values(model, PROMPTS, names, progress=False).engine == "hooks"


def test_an_edited_copy_plans_its_own_reads(tiny_model):
    model = tiny_model("gpt2")
    names = ["layers.0.layer_output", "logits"]
    plain = cache_values(model, PROMPTS, names, progress=False)  # a plan kept on the model, copied with its __dict__
    with model.edit() as (_tracer, edited):
        edited.layers[0].layer_output[:] = 0
    zeroed = cache_values(edited, PROMPTS, names, progress=False)
    assert zeroed.engine == "nnsight" and not zeroed["layers.0.layer_output"].any()
    assert not torch.equal(zeroed["logits"], plain["logits"])
    again = cache_values(model, PROMPTS, names, progress=False)
    assert again.engine == "hooks" or "logits" in again.fallback
    for name in names:
        assert torch.equal(again[name], plain[name]), name
