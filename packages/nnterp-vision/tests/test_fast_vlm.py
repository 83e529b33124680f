"""FastVLM: a timm FastViT tower served at its stem and its last feature map, its convolutional blocks saying why they serve nothing."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.timm import CONV_SIZES, ConvTimmVision
from vision_harness import VisionFamilyTests, features_at, features_returned, read
from transformers.models.timm_wrapper.modeling_timm_wrapper import TimmWrapperModel

#: the checks that read block values: they skip on FastViT, saying why
PROMPT = "<image>Hello world"
#: every image is 128 pixels a side: a 32 x 32 stem map of 8 channels, a 2 x 2 last map of 64, so 4 image tokens
STEM, TOKENS = 32 * 32, 4


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, ConvTimmVision) and vision is model.model.vision_tower and model.projector is vision.projector
    # one block per stage: three RepMixer stages and two attention stages
    assert [type(block._module).__name__ for block in vision.layers] == ["RepMixerBlock"] * 3 + ["AttentionBlock"] * 2
    assert (vision.num_layers, vision.vision_hidden_size, vision.patch_size, vision.num_prefix_tokens) == (5, 64, 64, 0)
    assert model.projector.projector_input_size == 64
    for size in ("num_heads", "head_dim", "intermediate_size", "image_size"):
        with pytest.raises(Unavailable, match="convolutional or hybrid tower"):
            getattr(vision, size)
    assert CONV_SIZES.startswith("a convolutional or hybrid tower")
    with pytest.raises(Unavailable, match="2D feature map"):
        vision.layers[3].layer_output
    assert vision.support()["patch_embeddings"] is None and vision.support()["tower_output"] is None


def test_last_map_is_one_token_per_position(model):
    mask, patches, grid, tower, taken, projected, features, stream = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.timm_model.final_conv.output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
        "layers.0.layer_input",
    )
    assert patches.shape == (1, STEM, 8) and grid.shape == (1, 64, 2, 2) and tower.shape == (1, TOKENS, 64)
    # tower_output is the last map in raster order, as the wrapper flattens it for the projector
    assert torch.equal(tower, grid.flatten(2).transpose(1, 2)) and torch.equal(taken, tower)
    module = model.projector._module
    torch.testing.assert_close(projected, module.linear_2(module.act(module.linear_1(tower))))
    assert mask.sum() == TOKENS and torch.equal(projected[0], features) and torch.equal(stream[mask], features)


def test_assigned_maps_land_on_the_grid(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        model.vision.tower_output = torch.zeros(1, TOKENS, 64)
        taken = model.projector.projector_input.save()
    assert taken.abs().max() == 0


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeProjection = features_at(
    ConvTimmVision, "/projector.linear_2.input", "the projector's second linear's input: the right shape, the wrong tensor",
)


FeaturesReturned = features_returned(ConvTimmVision)


class TestFastVlm(VisionFamilyTests):
    checkpoint = "fast_vlm"
    no_image_values = ("vision.tower_output",)
    breaks = (
        ("image_features_reach_the_text", {TimmWrapperModel: FeaturesBeforeProjection}, "against image_features: off by"),
        ("written_image_values_move_downstream", {TimmWrapperModel: FeaturesReturned}, "left the logits unchanged"),
    )
