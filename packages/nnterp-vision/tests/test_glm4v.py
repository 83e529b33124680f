"""GLM-4.1V: the packed Qwen-like ViT keeps the blocks' identities, its final norm is tower_output, and the downsampled, merged features are what the text model receives."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.runner import PROMPTS
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glm4v
from nnterp_vision.testing import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, assert_tree, read
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention, Glm4vVisionModel

PROMPT = "<|image|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    vision = model.vision
    assert_tree(model, Glm4vVision, "model.visual", Glm4vMerger, "vision.merger")
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    # the tower is 32 wide (2 heads of 16), its blocks' MLP out_hidden_size (64) wide; the merger takes 64-wide rows
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 64, 2, None)
    assert vision.layers[0].mlp.intermediate_size == 64 and model.projector.projector_input_size == 64
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.input_layernorm is layer.norm1
    # the text model is GLM-4's sandwich block: the contributions are the post-sublayer norms' outputs
    assert model.layers[0].mlp.act_fn is model.layers[0].mlp.activation_fn


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


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeMerging(Glm4vVision):
    """image_features read at the merger's input, the downsampled rows: the right shape, not what the text receives."""

    image_features = Glm4vVision.image_features.at("merger.input", select=0)


class TestGlm4v(VisionFamilyTests):
    checkpoint = "glm4v"
    family = glm4v.FAMILY
    breaks = (
        ("vision_contribution", {Glm4vVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {Glm4vVisionModel: FeaturesBeforeMerging}, "against image_features: off by"),
    )
