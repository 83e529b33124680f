"""Mistral 3: a Pixtral tower, packed, whose blocks keep the text blocks' identities, and a patch merger whose rows reach the text."""

import torch
from nnterp_vision.components.pixtral import VARIABLE_RESOLUTION, PixtralVision
from vision_harness import PatternAtScores, VisionFamilyTests, WrongContribution, assert_one_packed_row
from vision_harness import assert_packed_apart, assert_tiny_pixtral, features_returned, packed_pair
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralVisionModel

PROMPT = "[IMG]Hello world"
#: the checks' 40 x 48 image is kept (its longest side is the tower's 48) and padded to 8-pixel merge units:
#: 10 x 12 patches of 4 pixels, merged 2 x 2 into 5 x 6 image tokens
PATCHES, TOKENS = 120, 30


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, PixtralVision)
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert_tiny_pixtral(vision)
    assert model.projector.projector_input_size == 64
    assert VARIABLE_RESOLUTION.startswith("the tower takes any resolution")


def test_one_image_is_one_packed_row(model):
    # the projector takes the last block's stream (vision_feature_layer -1), squeezed; its rows are the scattered features
    assert_one_packed_row(model, PROMPT, PATCHES, TOKENS)


def test_two_images_pack_under_a_block_diagonal_mask(model):
    mask, patches, pattern, features, stream = packed_pair(
        model, "[IMG]Hello[IMG] world", "vision.image_token_mask", "vision.patch_embeddings",
        "vision.layers.0.self_attn.attention_probabilities", "vision.image_features", "layers.0.layer_input",
    )
    assert_packed_apart(patches, pattern, PATCHES)  # the second image's 6 x 4 patches merge into 3 x 2 image tokens
    assert mask.sum() == TOKENS + 6 and torch.equal(stream[mask], features)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesReturned = features_returned(PixtralVision)


class TestMistral3(VisionFamilyTests):
    checkpoint = "mistral3"
    no_image_values = ("vision.patch_embeddings",)
    breaks = (
        ("vision_contribution", {PixtralAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {PixtralAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("written_image_values_move_downstream", {PixtralVisionModel: FeaturesReturned}, "left the logits unchanged"),
    )
