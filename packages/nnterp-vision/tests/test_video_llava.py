"""Video-LLaVA: LLaVA on its image tower, keyed by path beside a video tower of the same class."""

import pytest
import torch
from nnsight.intervention.envoy import Envoy
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks.vision import image
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import Vision, VisionLayer, no_images
from nnterp_vision.families import video_llava
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.testing import PatternAtScores, WrongContribution

PROMPT = "<image>Hello world"


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("video_llava")


def broken(envoys):
    """The Video-LLaVA family with the keys of ``envoys`` mapped to other components."""
    return StandardizedTransformer(tiny_checkpoint("video_llava"), family=with_envoys(video_llava, envoys), attn_implementation="eager")


def test_tree_and_sizes(model):
    vision = model.vision
    assert type(vision) is Vision and vision is model.model.image_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj
    # the video tower is the same class, left unserved: plain envoys, not the text model's components
    video = model.model.video_tower.encoder.layers[0]
    assert type(video) is Envoy and type(video.self_attn) is Envoy and type(video.mlp) is Envoy
    assert isinstance(vision.layers[0], VisionLayer) and len(model.layers) == 2


def test_image_features_are_the_projection_of_layer_minus_two(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        block = model.vision.layers[-2].layer_output.save()
        taken = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # 16 patches and the class row; the projector takes layers[-2]'s stream without the class row
    assert block.shape == (1, 17, 64) and torch.equal(taken, block[:, 1:]) and mask.sum() == 16
    # the projection is scattered unflattened, [images, 16, hidden]: image_features is it viewed one row per token
    assert projected.shape == (1, 16, 64) and torch.equal(projected.flatten(0, 1), features)


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    two, text = "<image>Hello<image> world", "The cat sat on the mat again"
    with torch.no_grad(), model.trace([two, text], images=[[image(1), image(2)], []]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    assert mask[0].sum() == 32 and not mask[1].any() and torch.equal(stream[mask], features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeActivation(Vision):
    """image_features read at the projector's first linear layer, before its activation and second layer."""

    @EProperty("/projector.linear_1.output", "The projector's first layer", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {video_llava.IMAGE_BLOCKS + ".self_attn": WrongContribution}, "against layer_output: off by"),
        (
            "vision_pattern_is_softmax_of_scores",
            {video_llava.IMAGE_BLOCKS + ".self_attn": PatternAtScores},
            "against attention_probabilities: off by",
        ),
        ("image_features_reach_the_text", {"model.image_tower": FeaturesBeforeActivation}, "against image_features: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
