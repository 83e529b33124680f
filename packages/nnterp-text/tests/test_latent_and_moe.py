"""Latent attention, mixtures of experts, and blocks that are Llama's with one difference: the kit's identities on each."""

import pytest
import torch

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


@pytest.mark.parametrize("name", ["deepseek_v2", "deepseek_v3", "mimo_v2_flash", "dots3_note_text"])
def test_queries_and_keys_are_wider_than_values(tiny_model, name):
    model = tiny_model(name)
    found = []
    with torch.no_grad(), model.trace(PROMPTS):
        for block in model.layers:
            attention = block.self_attn
            found.append(
                [
                    attention.attention_queries.detach().clone(),
                    attention.attention_keys.detach().clone(),
                    attention.attention_values.detach().clone(),
                    attention.attention_head_outputs.detach().clone(),
                ]
            )
    for block, (queries, keys, values, heads) in zip(model.layers, found):
        attention = block.self_attn
        assert attention.qk_head_dim != attention.head_dim
        assert queries.shape[-1] == keys.shape[-1] == attention.qk_head_dim
        assert values.shape[-1] == heads.shape[-1] == attention.head_dim
        assert queries.shape[1] == heads.shape[2] == attention.num_heads
        assert keys.shape[1] == values.shape[1] == attention.num_kv_heads


def test_deepseek_sizes_are_the_modules(tiny_model):
    attention = tiny_model("deepseek_v3").layers[0].self_attn
    module = attention._module
    assert attention.qk_head_dim == module.qk_nope_head_dim + module.qk_rope_head_dim
    assert attention.head_dim == module.v_head_dim


def test_moe_blocks_say_why_and_dense_blocks_keep_their_neurons(tiny_model):
    model = tiny_model("deepseek_v3")
    support = model.support()
    assert "experts" not in model.layers[0].mlp.__dict__ and "experts" in model.layers[1].mlp.__dict__
    for name in ("mlp.mlp_activation", "mlp.mlp_neurons"):
        reasons = support[name]
        assert 0 not in reasons
        assert set(reasons) == set(range(1, model.num_layers))
        assert all("mixture of experts" in reason for reason in reasons.values())


def test_minicpm3_contributions_are_the_scaled_outputs(tiny_model):
    model = tiny_model("minicpm3")
    block = model.layers[1]
    scale = block._module.residual_scale
    assert scale != 1
    with torch.no_grad(), model.trace(PROMPTS):
        contribution = block.self_attn.attention_output.detach().clone().save()
        output = block.self_attn.output[0].detach().clone().save()
    torch.testing.assert_close(contribution, output * scale)


def test_dbrx_attention_is_reached_inside_norm_attn_norm(tiny_model):
    model = tiny_model("dbrx")
    block = model.layers[0]
    assert block.self_attn is block.norm_attn_norm.attn
    assert block.self_attn.o_proj is block.norm_attn_norm.attn.out_proj
    assert block.input_layernorm is block.norm_attn_norm.norm_1
    assert block.post_attention_layernorm is block.norm_attn_norm.norm_2
    assert block.mlp is block.ffn


def test_mimo_scores_are_unavailable_only_where_sinks_join_the_softmax(tiny_model):
    model = tiny_model("mimo_v2_flash")
    reasons = model.support()["self_attn.attention_scores"]
    sinks = {index for index, block in enumerate(model.layers) if block.self_attn._module.sinks is not None}
    assert sinks and set(reasons) == sinks
    assert all("sink" in reason for reason in reasons.values())
    assert model.support()["self_attn.attention_probabilities"] is None


def test_zaya_adds_its_sublayers_through_an_affine_rescaling_and_skip_carries_the_router_state(tiny_model):
    model = tiny_model("zaya")
    block = model.layers[0]
    with torch.no_grad(), model.trace(PROMPTS):
        stream = block.layer_input.detach().clone().save()
        rescaling = block.layer_input_rescaling.detach().clone().save()
        own = block.self_attn.output[0].detach().clone().save()
        attention = block.self_attn.attention_output.detach().clone().save()
        mid = block.layer_mid.detach().clone().save()
    scaling = block._module.post_attention_residual_scale  # after the trace: the weights are loaded
    with torch.no_grad():
        torch.testing.assert_close(attention, (own + scaling.hidden_states_bias) * scaling.hidden_states_scale)
        torch.testing.assert_close(rescaling, (stream + scaling.residual_bias) * scaling.residual_scale - stream)
    torch.testing.assert_close(mid, stream + rescaling + attention)
    with torch.no_grad(), model.trace(PROMPTS):
        sent = model.layers[1].inputs[0][1].detach().clone().save()
        model.layers[1].skip(model.layers[1].layer_input)
        received = model.layers[2].inputs[0][1].detach().clone().save()
    torch.testing.assert_close(received, sent)


def test_bitnet_heads_are_what_o_proj_receives(tiny_model):
    model = tiny_model("bitnet")
    attention = model.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPTS):
        normed = attention.attn_sub_norm.output.detach().clone().save()
        heads = attention.attention_head_outputs.detach().clone().save()
    torch.testing.assert_close(heads.flatten(-2), normed)
