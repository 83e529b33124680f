"""Gemma 3: a SigLIP tower whose output the projector pools, each value read where it is."""

import torch
from nnterp_vision.components.siglip import SiglipVision
from nnterp_vision.families import gemma3
from vision_harness import VisionFamilyTests, WrongContribution, features_at, read
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

PROMPT = "<start_of_image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert isinstance(vision, SiglipVision) and isinstance(model.projector, gemma3.PoolingProjector)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert model.projector.projector_input_size == 64
    assert model.processor.image_token == "<start_of_image>"
    # the text model keeps one sliding and one full layer
    assert model.text_config.layer_types == ["sliding_attention", "full_attention"]


def test_projector_pools_tower_output(model):
    mask, tower, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.tower_output", "projector.projector_input",
        "projector.projector_output", "vision.image_features",
    )
    # the projector takes tower_output whole (16 patches) and returns mm_tokens_per_image (4) rows per image
    assert tower.shape == (1, 16, 64) and torch.equal(taken, tower)
    assert projected.shape == (1, 4, 64) and mask.sum() == 4
    assert torch.equal(projected.flatten(0, 1), features)
    # its rows are the 2 x 2 average pools of the patch grid, normed and projected
    grid = tower.transpose(1, 2).reshape(1, 64, 4, 4)
    pooled = torch.nn.functional.avg_pool2d(grid, 2).flatten(2).transpose(1, 2)
    module = model.projector._module
    expected = module.mm_soft_emb_norm(pooled) @ module.mm_input_projection_weight
    torch.testing.assert_close(projected, expected)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeNorm = features_at(
    SiglipVision, "/projector.mm_soft_emb_norm.input",
    "the projector's norm's input (the pooled patches): the right shape, the wrong tensor",
)


class TestGemma3(VisionFamilyTests):
    checkpoint = "gemma3"
    no_image_values = ("vision.tower_output",)
    breaks = (
        ("vision_contribution", {SiglipAttention: WrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {SiglipVisionModel: FeaturesBeforeNorm}, "against image_features: off by"),
    )
