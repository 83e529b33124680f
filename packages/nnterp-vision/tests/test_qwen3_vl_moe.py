"""Qwen3-VL-MoE: Qwen3-VL's tower, mergers and DeepStack keep their identities over a Qwen3-MoE text model whose mixtures are served."""

import pytest
import torch
from nnterp import Moe, Unavailable
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from nnterp_vision.families import qwen3_vl_moe
from nnterp_vision.testing import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, assert_tree, read
from transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe import Qwen3VLMoeTextSparseMoeBlock, Qwen3VLMoeVisionAttention

PROMPT = "<|image_pad|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    vision = model.vision
    assert_tree(model, Qwen3Vision, "model.visual", Qwen3Merger, "vision.merger")
    assert isinstance(vision.deepstack_merger_list[0], Qwen3Merger)
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.deepstack_layers) == (8, 128, 2, (0,))
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # the text model's blocks are mixtures: 4 experts, 2 per token, the router under its standard name
    mlp = model.layers[0].mlp
    assert isinstance(mlp, Moe) and (mlp.num_experts, mlp.top_k) == (4, 2) and mlp.router is mlp.gate
    assert not isinstance(vision.layers[0].mlp, Moe) and vision.layers[0].mlp.up_proj is vision.layers[0].mlp.linear_fc1


def test_image_tokens_route_through_the_mixture(model):
    mask, deep, features, stream, indices, routed, contribution, out0, in1 = read(
        model, PROMPT, "vision.image_token_mask", "vision.deepstack_merger_list.0.projector_output",
        "vision.image_features", "layers.0.layer_input", "layers.0.mlp.expert_indices", "layers.0.mlp.routed_output",
        "layers.0.mlp.mlp_output", "layers.0.layer_output", "layers.1.layer_input",
    )
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and features.shape == deep.shape == (TOKENS, 64)
    assert torch.equal(stream[mask], features)
    # every token, image tokens included, picks 2 of the 4 experts; the mixture adds what the experts sum to
    assert indices.shape[-1] == 2 and int(indices.max()) < 4 and torch.equal(routed, contribution)
    # DeepStack merger 0's output is added after text layer 0, at the image tokens only
    assert torch.allclose(out0[mask] + deep, in1[mask], atol=1e-6) and torch.equal(out0[~mask], in1[~mask])


class TestQwen3VlMoe(VisionFamilyTests):
    checkpoint = "qwen3_vl_moe"
    family = qwen3_vl_moe.FAMILY
    breaks = (
        ("vision_contribution", {Qwen3VLMoeVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        # the plain mixture reads norm_topk_prob, which this router has not: it renormalizes always
        ("routing_follows_scoring", {Qwen3VLMoeTextSparseMoeBlock: Moe}, "expert_weights against route(router_logits)"),
    )
