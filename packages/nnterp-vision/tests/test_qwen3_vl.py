"""Qwen3-VL and Qwen3-VL-MoE: the Qwen ViT's identities hold, the main merger's features are what the scatter hands the
text model, and each DeepStack merger's output is what the text model adds after its layer. Qwen3-VL-MoE puts the same
tower over a Qwen3-MoE text model whose mixtures are served."""

import pytest
import torch
from nnterp import Moe, Unavailable
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from nnterp_vision.families import qwen3_vl_moe
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, assert_tree, read
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionAttention
from transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe import Qwen3VLMoeTextSparseMoeBlock, Qwen3VLMoeVisionAttention

PROMPT = "<|image_pad|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def is_moe(model):
    return model.family is qwen3_vl_moe.FAMILY


def test_tree_and_sizes(model):
    vision = model.vision
    assert_tree(model, Qwen3Vision, "model.visual", Qwen3Merger, "vision.merger")
    assert isinstance(vision.deepstack_merger_list[0], Qwen3Merger)
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention) and not isinstance(vision.layers[0].mlp, Moe)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 128, 2, None)
    assert vision.deepstack_layers == (0,) and vision.deepstack_mergers == [vision.deepstack_merger_list[0]]
    assert model.projector.projector_input_size == 64 == vision.deepstack_merger_list[0].projector_input_size
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.mlp.up_proj is layer.mlp.linear_fc1
    assert layer.mlp.down_proj is layer.mlp.linear_fc2 and layer.input_layernorm is layer.norm1
    # Qwen3-VL-MoE's text blocks are mixtures: 4 experts, 2 per token, the router under its standard name
    mlp = model.layers[0].mlp
    assert isinstance(mlp, Moe) == is_moe(model)
    if is_moe(model):
        assert (mlp.num_experts, mlp.top_k) == (4, 2) and mlp.router is mlp.gate


def test_merger_feeds_the_scatter_and_deepstack_feeds_layer_one(model):
    mask, block0, deep_in, deep_out, merged_in, merged, tower, features, out0, in1 = read(
        model, PROMPT, "vision.image_token_mask", "vision.layers.0.layer_output",
        "vision.deepstack_merger_list.0.projector_input", "vision.deepstack_merger_list.0.projector_output",
        "projector.projector_input", "projector.projector_output", "vision.tower_output", "vision.image_features",
        "layers.0.layer_output", "layers.1.layer_input",
    )
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and block0.shape == (1, PATCHES, 64)
    # DeepStack merger 0 reads tower block 0's stream; the main merger the last block's; the scatter takes the main merger's output
    assert torch.equal(deep_in, block0[0]) and torch.equal(tower, merged_in[None])
    assert merged.shape == deep_out.shape == (TOKENS, 64) and torch.equal(merged, features)
    # the text model adds DeepStack merger 0's output after text layer 0, at the image tokens only
    assert torch.allclose(out0[mask] + deep_out, in1[mask], atol=1e-6)
    assert torch.equal(out0[~mask], in1[~mask])
    assert (out0[mask] - in1[mask]).abs().max() > 0


def test_written_deepstack_features_move_layer_one(model):
    baseline, logits = read(model, PROMPT, "layers.1.layer_input", "logits")
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        model.vision.deepstack_merger_list[0].projector_output = torch.zeros(TOKENS, 64)
        out0 = model.layers[0].layer_output.detach().clone().save()
        zeroed = model.layers[1].layer_input.detach().clone().save()
        moved = model.logits.detach().clone().save()
    # with the addition zeroed, layer 1 receives layer 0's output unchanged
    assert torch.equal(out0, zeroed) and (zeroed - baseline).abs().max() > 0 and (moved - logits).abs().max() > 0


def test_image_tokens_route_through_the_mixture(model):
    if not is_moe(model):
        pytest.skip("Qwen3-VL's text model has no mixture")
    mask, features, stream, indices, routed, contribution = read(
        model, PROMPT, "vision.image_token_mask", "vision.image_features", "layers.0.layer_input",
        "layers.0.mlp.expert_indices", "layers.0.mlp.routed_output", "layers.0.mlp.mlp_output",
    )
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and torch.equal(stream[mask], features)
    # every token, image tokens included, picks 2 of the 4 experts; the mixture adds what the experts sum to
    assert indices.shape[-1] == 2 and int(indices.max()) < 4 and torch.equal(routed, contribution)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class DeepStackTests(VisionFamilyTests):
    """The DeepStack merger's output is an image value too: no image, no addition after text layer 0."""

    no_image_values = ("vision.deepstack_merger_list.0.projector_output",)

    def test_no_image_makes_image_values_unavailable(self, model):
        super().test_no_image_makes_image_values_unavailable(model)
        with torch.no_grad(), model.trace("Hello world"):
            out0 = model.layers[0].layer_output.save()
            in1 = model.layers[1].layer_input.save()
        assert torch.equal(out0, in1)


class TestQwen3Vl(DeepStackTests):
    checkpoint = "qwen3_vl"
    breaks = (
        ("vision_contribution", {Qwen3VLVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )


class TestQwen3VlMoe(DeepStackTests):
    checkpoint = "qwen3_vl_moe"
    breaks = (
        ("vision_contribution", {Qwen3VLMoeVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        # the plain mixture reads norm_topk_prob, which this router has not: it renormalizes always
        ("routing_follows_scoring", {Qwen3VLMoeTextSparseMoeBlock: Moe}, "expert_weights against route(router_logits)"),
    )
