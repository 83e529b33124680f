"""InternVL: an InternViT over tiles whose blocks scale their contributions, a pixel shuffle before the projector, a Qwen2 text model."""

import pytest
import torch
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import VisionAttention, no_images
from nnterp_vision.components.internvl import InternVision, LayerScaledAttention, LayerScaledMlp
from nnterp_vision.families import internvl
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.reasons import NO_IMAGE
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.internvl.modeling_internvl import InternVLVisionAttention, InternVLVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<IMG_CONTEXT>Hello world"
#: the checks' 40 x 48 image: 2 x 2 tiles of 16 x 16 and the thumbnail, each 4 x 4 patches (and a class row) shuffled into 4 tokens
CROPS, PATCHES, TOKENS_PER_CROP = 5, 16, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("internvl")


def broken(envoys):
    """The InternVL family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("internvl"), family=with_envoys(internvl, envoys), attn_implementation="eager")


@pytest.mark.parametrize("seed", [0, 3, 11, 12])
def test_vision_checks_pass_on_drawn_cases(model, seed):
    case = Case(("The cat sat", "Hello world again"), seed=seed)
    verdicts = [verdict(name, model, case) for name in VISION_CHECKS]
    assert [v.status for v in verdicts] == ["pass"] * len(VISION_CHECKS), "\n".join(map(str, verdicts))


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, InternVision) and vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    # the config's (height, width) pairs, one side each
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (4, 16, 128)
    assert model.projector.projector_input_size == 4 * 64
    block = vision.layers[0]
    assert isinstance(block.self_attn, LayerScaledAttention) and isinstance(block.mlp, LayerScaledMlp)
    assert block.self_attn is block.attention and block.self_attn.o_proj is block.self_attn.projection_layer
    assert block.input_layernorm is block.layernorm_before and block.post_attention_layernorm is block.layernorm_after


def test_contributions_are_the_layer_scaled_outputs(model):
    block = model.vision.layers[0]
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        attention = block.self_attn.output[0].save()
        contribution = block.self_attn.attention_output.save()
        mlp = block.mlp.output.save()
        mlp_contribution = block.mlp.mlp_output.save()
    assert torch.equal(contribution, attention * block._module.lambda_1)
    assert torch.equal(mlp_contribution, mlp * block._module.lambda_2)
    # a written contribution is divided back: doubling it doubles what the block adds
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        block.self_attn.attention_output = block.self_attn.attention_output * 2
        doubled = block.self_attn.output[0].save()
    torch.testing.assert_close(doubled, attention * 2)


def test_the_class_row_is_dropped_and_the_patches_shuffled(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # the blocks carry the class row first; the projector receives each 2 x 2 square of the other rows as one
    assert patches.shape == (CROPS, PATCHES, 64) and tower.shape == (CROPS, 1 + PATCHES, 64)
    grid = tower[:, 1:].unflatten(1, (4, 4))  # crops, rows, columns, width
    # the shuffle: token (row, column) holds patches (2 row + i, 2 column + j), i slowest, in raster order
    squares = grid.unflatten(1, (2, 2)).unflatten(3, (2, 2)).permute(0, 1, 3, 2, 4, 5).flatten(3)
    assert torch.equal(selected, squares.flatten(1, 2))
    assert projected.shape == (CROPS, TOKENS_PER_CROP, 64) and mask.sum() == CROPS * TOKENS_PER_CROP
    assert torch.equal(projected.flatten(0, 1), features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()
    assert text.shape[-1] == 64
    assert NO_IMAGE.startswith("this trace passes no image")


# -- each check fails on a family that breaks what it checks ----------------------------------------


class UnscaledAttention(VisionAttention):
    """The attention's contribution read at its output, before the block's layer scale: InternViT read as a plain ViT."""


class FeaturesBeforeActivation(InternVision):
    """image_features read at the projector's first linear layer, before its activation and second layer."""

    @EProperty("/projector.linear_1.output", "The projector's first layer", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


FeaturesReturned = features_returned(InternVision)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {InternVLVisionAttention: UnscaledAttention}, "against layer_output: off by"),
        ("vision_contribution", {InternVLVisionAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {InternVLVisionAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {InternVLVisionModel: FeaturesBeforeActivation}, "against image_features: off by"),
        ("written_image_values_move_downstream", {InternVLVisionModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
