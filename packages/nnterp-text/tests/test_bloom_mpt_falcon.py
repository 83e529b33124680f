"""BLOOM, MPT and Falcon: ALiBi (in their own arithmetic, or in the mask Falcon's interface receives), and residuals added
inside the sublayers or the block."""

import pytest
import torch
from nnterp import INTERIOR, PARALLEL
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import run

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
#: falcon: rotary, multi-query, parallel (7B); falcon-alibi: ALiBi, sequential (RW);
#: falcon-new-decoder: grouped keys, ln_attn and ln_mlp (40B)
CHECKPOINTS = ["bloom", "mpt", "falcon", "falcon-alibi", "falcon-new-decoder"]


def logits(model, edit=None, prompts=PROMPTS):
    with torch.no_grad(), model.trace(prompts):
        if edit is not None:
            edit(model)
        out = model.logits.detach().clone().save()
    return out


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_passes_every_check(tiny_model, name):
    failed = [str(v) for v in run(tiny_model(name), PROMPTS) if v.status == "fail"]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_every_interior_value_edited_in_place_or_assigned_moves_the_logits_alike(tiny_model, name):
    model = tiny_model(name)
    baseline = logits(model)
    for value in INTERIOR:

        def in_place(model, value=value):
            tensor = getattr(model.layers[1].self_attn, value)
            tensor[:] = tensor * 0.5 + 0.1

        def assigned(model, value=value):
            attention = model.layers[1].self_attn
            setattr(attention, value, getattr(attention, value) * 0.5 + 0.1)

        edited, written = logits(model, in_place), logits(model, assigned)
        assert not torch.equal(written, baseline), value
        torch.testing.assert_close(edited, written, msg=value)


# (checkpoint, component, value, a path that includes the residual, select)
WRONG = [
    ("bloom", "self_attn", "attention_output", "output", 0),  # BloomAttention returns the stream
    ("bloom", "mlp", "mlp_output", "output", None),  # so does BloomMLP
    ("mpt", "mlp", "mlp_output", "output", None),  # so does MptMLP
    ("falcon-alibi", "self_attn", "attention_output", "../post_attention_layernorm.input", None),  # the mid stream
    ("falcon", "mlp", "mlp_output", "../output", 0),  # the block's output
]


@pytest.mark.parametrize("name, component, value, wrong, select", WRONG)
def test_a_contribution_that_includes_the_residual_fails(tiny_model, monkeypatch, name, component, value, wrong, select):
    model = tiny_model(name)
    declared = type(getattr(model.layers[0], component)).values()[value]
    monkeypatch.setattr(declared, "key", wrong)
    monkeypatch.setattr(declared, "select", select)
    result = verdict("contribution", model, PROMPTS)
    assert result.status == "fail", result
    assert result.detail.startswith("layers[0]: ") and "off by" in result.detail


def test_standard_names_alias_native_envoys(tiny_model):
    native = [
        ("bloom", "self_attention", "input_layernorm"),
        ("mpt", "attn", "norm_1"),
        ("falcon-new-decoder", "self_attention", "ln_attn"),
    ]
    for name, attention, norm in native:
        model = tiny_model(name)
        for block in model.layers:
            assert block.self_attn is getattr(block, attention) and block.input_layernorm is getattr(block, norm)
        assert verdict("standard_names_alias_native_envoys", model, PROMPTS).status == "pass"


def test_falcon_blocks_have_a_mid_stream_only_when_sequential(tiny_model):
    for name in ("falcon", "falcon-new-decoder"):
        assert tiny_model(name).support()["layer_mid"] == {layer: PARALLEL for layer in range(3)}
    assert tiny_model("falcon-alibi").support()["layer_mid"] is None


def test_a_saved_falcon_mlp_output_is_not_summed_into_by_the_parallel_block(tiny_model):
    # the block runs `mlp_output += attention_output` on the MLP's own output tensor
    model = tiny_model("falcon")
    with torch.no_grad(), model.trace(PROMPTS):
        projected = model.layers[1].mlp.down_proj.output.clone().save()
        native = model.layers[1].mlp.output.save()
    assert not torch.equal(native, projected)
    with torch.no_grad(), model.trace(PROMPTS):
        projected = model.layers[1].mlp.down_proj.output.clone().save()
        contribution = model.layers[1].mlp.mlp_output.save()
    assert torch.equal(contribution, projected)


def test_falcon_new_decoder_keys_are_one_per_group_and_an_edit_reaches_the_whole_group(tiny_model):
    model = tiny_model("falcon-new-decoder")
    attention = model.layers[1].self_attn
    assert (attention.num_heads, attention.num_kv_heads) == (4, 2)

    def in_place(model):
        model.layers[1].self_attn.attention_keys[:, 1] = 0

    def assigned(model):
        keys = model.layers[1].self_attn.attention_keys.clone()
        keys[:, 1] = 0
        model.layers[1].self_attn.attention_keys = keys

    with torch.no_grad(), model.trace(PROMPTS):
        keys = model.layers[1].self_attn.attention_keys.save()
    assert keys.shape[1] == 2
    torch.testing.assert_close(logits(model, in_place), logits(model, assigned))


@pytest.mark.parametrize("name", ["bloom"])
def test_head_outputs_folded_into_the_batch_are_cut_per_invoke(tiny_model, name):
    model = tiny_model(name)
    alone = logits(model, prompts=PROMPTS[0])
    with torch.no_grad():
        with model.trace(PROMPTS[1]):
            heads = model.layers[1].self_attn.attention_head_outputs
            model.layers[1].self_attn.attention_head_outputs = torch.zeros_like(heads)
            zeroed = model.logits.detach().clone().save()
        with model.trace() as tracer:
            with tracer.invoke(PROMPTS[0]):
                first = model.layers[1].self_attn.attention_head_outputs.clone().save()
                untouched = model.logits.detach().clone().save()
            with tracer.invoke(PROMPTS[1]):
                model.layers[1].self_attn.attention_head_outputs[:] = 0
                second = model.logits.detach().clone().save()
    assert first.shape[0] == 1
    torch.testing.assert_close(untouched[:, -alone.shape[1] :], alone, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(second[:, -zeroed.shape[1] :], zeroed, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["bloom", "mpt"])
def test_a_contribution_read_after_its_module_started_still_resolves(tiny_model, name):
    # the contribution is an operation inside the sublayer; the forward is instrumented at load
    model = tiny_model(name)
    with torch.no_grad(), model.trace(PROMPTS):
        attention = model.layers[1].self_attn
        projected = attention.o_proj.output.clone().save()
        contribution = attention.attention_output.clone().save()
        mlp = model.layers[1].mlp
        neurons = mlp.act_fn.output.clone().save()
        output = mlp.mlp_output.clone().save()
    torch.testing.assert_close(contribution, projected)
    torch.testing.assert_close(output, model.layers[1].mlp.down_proj._module(neurons))
