"""GLM-4.1V and GLM-4.5V: the packed Qwen-like ViT keeps the blocks' identities, its final norm is tower_output, and the
downsampled, merged features are what the text model receives. GLM-4.5V puts the same tower over a GLM-4-MoE text model
whose mixtures (sigmoid router, shared expert) are served."""

import pytest
import torch
from nnterp import Moe, Unavailable
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.runner import PROMPTS
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glm4v_moe
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, assert_tree, read
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention, Glm4vVisionModel
from transformers.models.glm4v_moe.modeling_glm4v_moe import Glm4vMoeTextMoE, Glm4vMoeVisionAttention

PROMPT = "<|image|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def is_moe(model):
    return model.family is glm4v_moe.FAMILY


def test_tree_and_sizes(model):
    vision = model.vision
    assert_tree(model, Glm4vVision, "model.visual", Glm4vMerger, "vision.merger")
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention) and not isinstance(vision.layers[0].mlp, Moe)
    # the tower is 32 wide (2 heads of 16), its blocks' MLP out_hidden_size (64) wide; the merger takes 64-wide rows
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 64, 2, None)
    assert vision.layers[0].mlp.intermediate_size == 64 and model.projector.projector_input_size == 64
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.input_layernorm is layer.norm1
    # the text model is GLM-4's sandwich block (GLM-4.1V) or GLM-4-MoE's: block 0 dense (first_k_dense_replace),
    # block 1 a mixture of 4 routed experts, 2 per token, and one shared
    dense, second = model.layers[0].mlp, model.layers[1].mlp
    assert isinstance(second, Moe) == is_moe(model)
    if is_moe(model):
        assert (second.num_experts, second.top_k) == (4, 2) and second.router is second.gate
        assert model.support()["mlp.router_logits"] == {0: dense.no_mixture()}
    else:
        assert dense.act_fn is dense.activation_fn


def test_final_norm_downsample_and_merger(model):
    mask, patches, last, tower, merged_in, merged, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.layers.-1.layer_output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    visual = model.model.visual
    assert int(mask.sum()) == TOKENS and patches.shape == last.shape == tower.shape == (1, PATCHES, 32)
    # tower_output is the final norm of the last block's stream
    assert torch.equal(tower, visual.post_layernorm(last))
    # the strided convolution folds each 2 x 2 merge block (4 consecutive patches) into one 64-wide row: the merger's input
    blocks = tower[0].view(-1, 2, 2, 32).permute(0, 3, 1, 2)
    assert torch.allclose(visual.downsample(blocks).view(-1, 64), merged_in, atol=1e-6) and merged_in.shape == (TOKENS, 64)
    # the scatter hands the merger's output on unchanged
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)


def test_patch_embeddings_reach_the_tower_through_its_norm(model):
    # the check's default edit halves patch_embeddings, which the RMS norm after the convolution undoes (up to eps);
    # noise is not undone
    found = verdict("written_image_values_move_downstream", model, Case(tuple(PROMPTS), edit="noise"))
    assert found.status == "pass", str(found)
    shift = float(found.detail.rsplit("up to ", 1)[1])
    assert shift > 0.1, found.detail


def test_image_tokens_route_through_the_mixture(model):
    if not is_moe(model):
        pytest.skip("GLM-4.1V's text model has no mixture")
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


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeMerging(Glm4vVision):
    """image_features read at the merger's input, the downsampled rows: the right shape, not what the text receives."""

    image_features = Glm4vVision.image_features.at("merger.input", select=0)


class TestGlm4v(VisionFamilyTests):
    checkpoint = "glm4v"
    breaks = (
        ("vision_contribution", {Glm4vVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {Glm4vVisionModel: FeaturesBeforeMerging}, "against image_features: off by"),
    )


class TestGlm4vMoe(VisionFamilyTests):
    checkpoint = "glm4v_moe"
    breaks = (
        ("vision_contribution", {Glm4vMoeVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        # the softmax mixture's routing is not this sigmoid router's
        ("routing_follows_scoring", {Glm4vMoeTextMoE: Moe}, "expert_weights against route(router_logits)"),
    )
