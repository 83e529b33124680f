"""Aya Vision and Command A Vision: a SigLIP tower over tiles, a pixel-shuffle projector and a Cohere2 text model, whose
logits Aya's wrapper scales by logit_scale. Command A Vision shuffles the tower's normed output, has no projector norm
and leaves the logits unscaled."""

import torch
from nnterp import ParallelLayer
from nnterp_vision.components.pixel_shuffle import PixelShuffleProjector
from nnterp_vision.components.siglip import SiglipVision
from vision_harness import VisionFamilyTests, read, shuffled_squares, tower_breaks, transposed_squares, unembedded
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

#: each checkpoint's image placeholder
PROMPTS = {"aya_vision": "<image>Hello world", "cohere2_vision": "<|IMG_PATCH|>Hello world"}
#: the checks' 40 x 48 image: 2 x 2 tiles of 16 x 16 and the thumbnail, each 4 x 4 patches shuffled into 2 x 2 image tokens
CROPS, TOKENS_PER_CROP = 5, 4


def is_aya(model):
    return model.family.name == "aya_vision"


def test_tree_and_sizes(model):
    vision, projector = model.vision, model.projector
    assert isinstance(vision, SiglipVision) and isinstance(projector, PixelShuffleProjector)
    assert vision is model.model.vision_tower and projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (4, 16, 128)
    assert (projector.downsample_factor, projector.projector_input_size) == (2, 64)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj
    assert model.layers[0] is model.model.language_model.layers[0] and isinstance(model.layers[0], ParallelLayer)


def test_tiles_are_shuffled_into_the_image_tokens(model):
    mask, patches, last, tower, selected, projected, features = read(
        model, PROMPTS[model.family.name], "vision.image_token_mask", "vision.patch_embeddings", "vision.layers.-1.layer_output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # the tower runs on every tile and the thumbnail; Aya's projector takes the last block's stream, before
    # post_layernorm, Command A Vision's the normed output
    assert patches.shape == (CROPS, 16, 64)
    if is_aya(model):
        assert torch.equal(selected, last) and not torch.equal(selected, tower)
    else:
        assert torch.equal(selected, tower)
    # each 2 x 2 square of patches is one image token: the features are the projection's rows, crop after crop
    assert projected.shape == (CROPS, 2, 2, 64) and mask.sum() == CROPS * TOKENS_PER_CROP
    assert torch.equal(projected.flatten(0, 2), features)


def test_the_shuffle_folds_each_square_of_patches(model):
    selected, projected = read(model, PROMPTS[model.family.name], "projector.projector_input", "projector.projector_output")
    module = model.projector._module  # read after the trace: a lazy load's weights are made real at its first trace
    squares = shuffled_squares(selected)  # Aya's channel order; Command A Vision has no norm before the SwiGLU
    with torch.no_grad():
        x, gate = module.linear_1(module.layernorm(squares) if is_aya(model) else squares).chunk(2, dim=-1)
        expected = module.linear_2(module.act(gate) * x)
    torch.testing.assert_close(projected, expected)


def test_logits_are_scaled_on_aya_alone(model):
    # Cohere2's own causal LM multiplies by logit_scale; so does Aya Vision's wrapper, Command A Vision's does not
    assert model.text_config.logit_scale == 0.3
    projected, logits = unembedded(model)
    torch.testing.assert_close(projected * 0.3 if is_aya(model) else projected, logits)


# -- each check fails on a family that breaks what it checks ----------------------------------------

BREAKS = tower_breaks(SiglipAttention, SiglipVisionModel, transposed_squares(SiglipVision), "against image_features: off by", returned=SiglipVision)


class TestAyaVision(VisionFamilyTests):
    checkpoint = "aya_vision"
    breaks = BREAKS


class TestCohere2Vision(VisionFamilyTests):
    checkpoint = "cohere2_vision"
    breaks = BREAKS
