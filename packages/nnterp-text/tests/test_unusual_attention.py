"""Families whose attention or block is unusual: sinks, differential attention, rescaled or post-LN streams, AltUp.

GPT-OSS and Flint (a sink column in the softmax), Granite SWA and Granite-MoE
SWA (a sink scaling the head outputs), Granite-MoE-Shared (a shared MLP beside
the mixture), DiffLlama, Doge, GPT (openai-gpt), Gemma-3n, Gemma-4 and Emu3's
text model. Each passes the kit, skipping what it marks unavailable; the
decisions behind each unavailable value are pinned below.
"""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
CHECKPOINTS = [
    "gpt_oss",
    "flint",
    "granite_swa",
    "granitemoe_swa",
    "granitemoeshared",
    "diffllama",
    "doge",
    "openai-gpt",
    "gemma3n_text",
    "gemma4_text",
    "emu3",
]
#: the models whose softmax has a sink column, which the kit joins to the scores (sink_logits)
SINK_COLUMN = ("gpt_oss", "flint")
CONTRIBUTION = {"contribution", "mid_stream", "contribution_at_every_step"}
MIXTURE = {"neurons_make_contribution"}


def _read(model, layer, *names, prompts=PROMPTS):
    with torch.no_grad(), model.trace(prompts):
        block = model.layers[layer]
        found = []
        for name in names:
            host = block
            for part in name.split("."):
                host = host[int(part)] if part.isdigit() else getattr(host, part)
            found.append(host.detach().clone())
        found = found.save()
    return found


# -- attention sinks -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["granite_swa", "granitemoe_swa"])
def test_scaled_sink_scales_the_head_outputs_after_the_pattern(tiny_model, name):
    model = tiny_model(name)
    attention = model.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPTS):
        attention = model.layers[0].self_attn
        values = attention.attention_values.clone().save()
        scores = attention.attention_scores.clone().save()
        pattern = attention.attention_probabilities.clone().save()
        heads = attention.attention_head_outputs.clone().save()
    sums = pattern.sum(-1)
    torch.testing.assert_close(sums, torch.ones_like(sums))
    groups = attention.num_heads // attention.num_kv_heads
    mixed = pattern @ values.repeat_interleave(groups, dim=1)
    scale = torch.sigmoid(torch.logsumexp(scores, -1) - attention.sink_logits.detach().view(1, -1, 1))
    torch.testing.assert_close(heads, (mixed * scale.unsqueeze(-1)).transpose(1, 2), rtol=1e-5, atol=1e-6)


# -- a shared MLP beside the mixture ---------------------------------------------------


@pytest.mark.parametrize("name", ["granitemoeshared", "granitemoe_swa"])
def test_the_mixture_alone_is_not_the_mlps_contribution(tiny_model, name, monkeypatch):
    model = tiny_model(name)
    mlp_output = type(model.layers[0].mlp).values()["mlp_output"]
    monkeypatch.setattr(mlp_output, "key", "output")
    result = verdict("contribution", model, PROMPTS)
    assert result.status == "fail" and result.detail.startswith("layers[0]: ")


# -- differential attention ------------------------------------------------------------


def test_differential_attention_computes_its_pattern_once_per_half_of_the_values(tiny_model):
    model = tiny_model("diffllama")
    for name in ("attention_scores", "attention_probabilities", "attention_head_outputs"):
        with pytest.raises(Unavailable, match="differential attention"):
            getattr(model.layers[0].self_attn, name)
    with torch.no_grad(), model.trace(PROMPTS):
        attention = model.layers[1].self_attn
        values = attention.attention_values.clone().save()
        halves = [attention.source.attention_interface_1.inputs[0][3].clone()]
        first = attention.source.attention_interface_1.source.nn_functional_dropout_0.output.clone().save()
        halves.append(attention.source.attention_interface_2.inputs[0][3].clone())
        second = attention.source.attention_interface_2.source.nn_functional_dropout_0.output.clone().save()
        halves = halves.save()
    # the same pattern twice, each mixing one half of the value heads
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    kv = values.shape[1] // 2
    for half, received in zip(values.split(kv, dim=1), halves):
        torch.testing.assert_close(received, half.repeat(1, 2, 1, 1), rtol=0, atol=0)


def test_assigned_queries_reach_both_interface_calls(tiny_model):
    model = tiny_model("diffllama")
    with torch.no_grad(), model.trace(PROMPTS):
        attention = model.layers[1].self_attn
        attention.attention_queries = attention.attention_queries * 0.5
        assigned = model.logits.clone().save()
    with torch.no_grad(), model.trace(PROMPTS):
        queries = model.layers[1].self_attn.attention_queries
        queries[:] = queries * 0.5
        in_place = model.logits.clone().save()
    with torch.no_grad(), model.trace(PROMPTS):
        baseline = model.logits.clone().save()
    assert not torch.equal(assigned, baseline)
    torch.testing.assert_close(assigned, in_place, rtol=0, atol=0)


# -- streams no contribution sums to ----------------------------------------------------


def test_doge_rescales_the_residual_before_adding_the_attention(tiny_model):
    model = tiny_model("doge")
    names = ("layer_input", "layer_input_rescaling", "self_attn.attention_output", "layer_mid", "layer_mid_rescaling", "mlp.mlp_output", "layer_output")
    stream, input_term, attention, mid, mid_term, mlp, output = _read(model, 0, *names)
    block = model.layers[0]._module
    # the terms are what the block's arithmetic makes of its learned vectors, and the contributions the modules' outputs
    torch.testing.assert_close(input_term, (block.input_residual - 1) * stream)
    torch.testing.assert_close(mid_term, (block.post_attention_residual - 1) * mid)
    torch.testing.assert_close(mid, stream + input_term + attention)
    torch.testing.assert_close(output, mid + mid_term + mlp)
    assert model.layers[0].contributions() == names[1:3] + names[4:6]
    assert not torch.allclose(mid, stream + attention, atol=1e-3)
    with pytest.raises(Exception, match="derived"):
        with model.trace("Hello"):
            model.layers[0].layer_input_rescaling = torch.zeros(1)


def test_openai_gpt_normalizes_the_stream_after_each_sublayer(tiny_model):
    model = tiny_model("openai-gpt")
    with pytest.raises(Unavailable, match="post-LN"):
        model.layers[0].self_attn.attention_output
    with pytest.raises(Unavailable, match="post-LN"):
        model.layers[0].mlp.mlp_output
    stream, attention, mid, mlp, output = _read(model, 0, "layer_input", "self_attn.output.0", "layer_mid", "mlp.output", "layer_output")
    block = model.layers[0]._module
    with torch.no_grad():
        torch.testing.assert_close(mid, block.ln_1(stream + attention))
        torch.testing.assert_close(output, block.ln_2(mid + mlp))
    assert not torch.allclose(mid, stream + attention, atol=1e-2)


def test_openai_gpt_keys_are_served_sequence_before_width(tiny_model):
    model = tiny_model("openai-gpt")
    queries, keys, scores = _read(model, 1, "self_attn.attention_queries", "self_attn.attention_keys", "self_attn.attention_scores", prompts="Hello world there")
    products = queries @ keys.transpose(-1, -2) / queries.shape[-1] ** 0.5
    causal = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    torch.testing.assert_close(scores[..., causal], products[..., causal])


def test_gemma4_scales_the_stream_after_the_mlp(tiny_model):
    model = tiny_model("gemma4_text")
    names = ("layer_mid", "post_feedforward_layernorm.output", "post_per_layer_input_norm.output", "layer_output")
    mid, mlp, per_layer, output = _read(model, 0, *names)
    served = _read(model, 0, "mlp.mlp_output", "per_layer_input_output", "layer_output_rescaling")
    scalar = model.layers[0]._module.layer_scalar
    assert (scalar - 1).abs().max() > 1e-3  # the tiny checkpoint's scalar is not one
    torch.testing.assert_close(output, scalar * (mid + mlp + per_layer))
    assert per_layer.abs().max() > 1e-3  # the per-layer-input term is a third one
    torch.testing.assert_close(served[0], mlp)
    torch.testing.assert_close(served[1], per_layer)
    torch.testing.assert_close(served[2], (scalar - 1) * (mid + mlp + per_layer))


def test_gemma4_blocks_have_their_own_head_widths(tiny_model):
    model = tiny_model("gemma4_text")
    widths = [model.layers[layer].self_attn.head_dim for layer in range(model.num_layers)]
    assert widths == [16, 32]
    for layer, width in enumerate(widths):
        (queries,) = _read(model, layer, "self_attn.attention_queries")
        assert queries.shape[-1] == width


def test_gemma3n_blocks_serve_altup_streams_batch_first(tiny_model):
    model = tiny_model("gemma3n_text")
    block = model.layers[1]
    with torch.no_grad(), model.trace(PROMPTS):
        activated = block.source.attn_ffw_laurel_gated_0  # the forward's operations, instrumented before it runs
        stack = block.input.clone().save()
        streams = block.layer_input.clone().save()
        active = block.attention_collapsed.clone().save()
        activated = activated.output.clone().save()
        innovation = block.innovation.clone().save()
    # the model's [num_streams, batch, seq, hidden] stack, served [batch, seq, num_streams, hidden]
    assert stack.shape[0] == block.num_streams == model._module.config.altup_num_inputs
    torch.testing.assert_close(streams, stack.permute(1, 2, 0, 3), rtol=0, atol=0)
    # the innovation is what the sublayers add to the active prediction, as AltUp computes it
    torch.testing.assert_close(innovation, activated - active, rtol=0, atol=0)
    # what the MLP reads between the sublayers is the active stream alone: there are no mid streams
    with pytest.raises(Unavailable, match="only the active stream"):
        block.layer_mid
    assert block.contributions() == ()
    # decompose_resid's terms are refused by name: the sum of terms is the innovation's, on the active stream
    from nnterp.toolkit.attribution import DECOMPOSE_RESID
    from nnterp.toolkit.cache import expand_names

    with pytest.raises(Unavailable, match="several residual streams .AltUp."):
        expand_names(model, list(DECOMPOSE_RESID))


def test_gemma3n_stream_edits_reach_the_model_in_its_layout(tiny_model):
    model = tiny_model("gemma3n_text")
    with torch.no_grad(), model.trace(PROMPTS):
        streams = model.layers[1].layer_input
        streams[:, :, 2] = 0  # one stream, in the served layout
        received = model.layers[1].input.clone().save()
    assert torch.equal(received[2], torch.zeros_like(received[2])) and received[0].abs().sum() > 0
