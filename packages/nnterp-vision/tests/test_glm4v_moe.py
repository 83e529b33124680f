"""GLM-4.5V: GLM-4.1V's tower keeps its identities over a GLM-4-MoE text model whose mixtures (sigmoid router, shared expert) are served."""

import pytest
import torch
from nnterp import Moe, Unavailable
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glm4v_moe
from nnterp_vision.testing import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, assert_tree, read
from transformers.models.glm4v_moe.modeling_glm4v_moe import Glm4vMoeTextMoE, Glm4vMoeVisionAttention

PROMPT = "<|image|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    vision = model.vision
    assert_tree(model, Glm4vVision, "model.visual", Glm4vMerger, "vision.merger")
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size) == (8, 64, 2)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # text block 0 is dense (first_k_dense_replace), block 1 a mixture: 4 routed experts, 2 per token, one shared
    dense, mixture = model.layers[0].mlp, model.layers[1].mlp
    assert isinstance(mixture, Moe) and (mixture.num_experts, mixture.top_k) == (4, 2) and mixture.router is mixture.gate
    assert model.support()["mlp.router_logits"] == {0: dense.no_mixture()} and not isinstance(vision.layers[0].mlp, Moe)


def test_image_tokens_route_through_the_mixture(model):
    mask, features, stream, indices, routed, shared, contribution = read(
        model, PROMPT, "vision.image_token_mask", "vision.image_features", "layers.0.layer_input",
        "layers.1.mlp.expert_indices", "layers.1.mlp.routed_output", "layers.1.mlp.shared_expert_output",
        "layers.1.mlp.mlp_output",
    )
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and features.shape == (TOKENS, 64) and torch.equal(stream[mask], features)
    # every token, image tokens included, picks 2 of the 4 experts; the shared expert adds beside them
    assert indices.shape[-1] == 2 and int(indices.max()) < 4
    assert torch.allclose(routed + shared, contribution, atol=1e-6)


class TestGlm4vMoe(VisionFamilyTests):
    checkpoint = "glm4v_moe"
    family = glm4v_moe.FAMILY
    breaks = (
        ("vision_contribution", {Glm4vMoeVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        # the softmax mixture's routing is not this sigmoid router's
        ("routing_follows_scoring", {Glm4vMoeTextMoE: Moe}, "expert_weights against route(router_logits)"),
    )
