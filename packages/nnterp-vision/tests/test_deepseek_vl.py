"""DeepSeek-VL: a SigLIP tower whose every patch the MLP aligner projects to one image token."""

import torch
from nnterp_vision.components import Vision
from nnterp_vision.families import deepseek_vl
from nnterp_vision.testing import aligner_misread, assert_mixed_invoke_scatters, tower_breaks, VisionFamilyTests
from nnterp_vision.testing import assert_tiny_vit, read
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_model and model.projector is vision.projector and model.projector is model.model.aligner
    assert_tiny_vit(vision)
    assert vision.layers[0].mlp.up_proj is vision.layers[0].mlp.fc1
    assert model.projector.projector_input_size == 64
    assert model.processor.image_token == "<image>" and model.processor.num_image_tokens == 16


def test_image_features_are_the_aligned_tower_output(model):
    mask, patches, tower, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # no class row, one image token per patch; the aligner takes the normed last stream whole
    assert patches.shape == (1, 16, 64) and tower.shape == (1, 16, 64) and mask.sum() == 16
    assert torch.equal(taken, tower)
    # linear1, GELU, linear2, row by row; the wrapper flattens the rows into the scatter unchanged
    aligner = model.projector._module
    expected = aligner.linear2(torch.nn.functional.gelu(aligner.linear1(tower)))
    torch.testing.assert_close(projected, expected)
    assert features.shape == (16, 64) and torch.equal(projected.flatten(0, 1), features)


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    assert_mixed_invoke_scatters(model, 32)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeActivation = aligner_misread(Vision, "linear1")


class TestDeepseekVl(VisionFamilyTests):
    checkpoint = "deepseek_vl"
    family = deepseek_vl.FAMILY
    breaks = tower_breaks(SiglipAttention, SiglipVisionModel, FeaturesBeforeActivation, "against image_features: off by")
