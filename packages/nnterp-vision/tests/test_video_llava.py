"""Video-LLaVA: LLaVA on its image tower, keyed by path beside a video tower of the same class."""

import torch
from nnsight.intervention.envoy import Envoy
from nnterp_vision.components import Vision, VisionLayer
from nnterp_vision.families import video_llava
from vision_harness import assert_mixed_invoke_scatters, PatternAtScores, VisionFamilyTests, WrongContribution, assert_tiny_vit, features_at
from vision_harness import read

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert type(vision) is Vision and vision is model.model.image_tower and model.projector is vision.projector
    assert_tiny_vit(vision)
    # the video tower is the same class, left unserved: plain envoys, not the text model's components
    video = model.model.video_tower.encoder.layers[0]
    assert type(video) is Envoy and type(video.self_attn) is Envoy and type(video.mlp) is Envoy
    assert isinstance(vision.layers[0], VisionLayer) and len(model.layers) == 2


def test_image_features_are_the_projection_of_layer_minus_two(model):
    mask, block, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.layers.-2.layer_output", "projector.projector_input",
        "projector.projector_output", "vision.image_features",
    )
    # 16 patches and the class row; the projector takes layers[-2]'s stream without the class row
    assert block.shape == (1, 17, 64) and torch.equal(taken, block[:, 1:]) and mask.sum() == 16
    # the projection is scattered unflattened, [images, 16, hidden]: image_features is it viewed one row per token
    assert projected.shape == (1, 16, 64) and torch.equal(projected.flatten(0, 1), features)


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    assert_mixed_invoke_scatters(model, 32)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeActivation = features_at(
    Vision, "/projector.linear_1.output", "the projector's first linear layer, before its activation and second layer",
)


class TestVideoLlava(VisionFamilyTests):
    checkpoint = "video_llava"
    breaks = (
        ("vision_contribution", {video_llava.IMAGE_BLOCKS + ".self_attn": WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {video_llava.IMAGE_BLOCKS + ".self_attn": PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {"model.image_tower": FeaturesBeforeActivation}, "against image_features: off by"),
    )
