"""Command A Vision: Aya Vision's tiles and pixel shuffle on the tower's normed output, no projector norm, a Cohere2 text model."""

import pytest
import torch
from nnterp import EProperty, ParallelLayer, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import no_images
from nnterp_vision.components.pixel_shuffle import PixelShuffleProjector
from nnterp_vision.components.siglip import SiglipVision
from nnterp_vision.families import cohere2_vision
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.reasons import NO_IMAGE
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|IMG_PATCH|>Hello world"
#: the checks' 40 x 48 image: 2 x 2 tiles of 16 x 16 and the thumbnail, each 4 x 4 patches shuffled into 2 x 2 image tokens
CROPS, TOKENS_PER_CROP = 5, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("cohere2_vision")


def broken(envoys):
    """The Command A Vision family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("cohere2_vision"), family=with_envoys(cohere2_vision, envoys), attn_implementation="eager")


@pytest.mark.parametrize("seed", [0, 3, 11, 12])
def test_vision_checks_pass_on_drawn_cases(model, seed):
    case = Case(("The cat sat", "Hello world again"), seed=seed)
    verdicts = [verdict(name, model, case) for name in VISION_CHECKS]
    assert [v.status for v in verdicts] == ["pass"] * len(VISION_CHECKS), "\n".join(map(str, verdicts))


def test_text_kit_passes_on_text_prompts(model):
    verdicts = run(model, PROMPTS, only=[name for name in CHECKS if name not in VISION_CHECKS])
    failed = [str(v) for v in verdicts if v.status != "pass" and v.name != "mid_stream"]
    assert not failed, "\n".join(failed)
    assert len(verdicts) >= 15
    # Cohere2's block is parallel: no stream between its attention and its MLP, so that check has nothing to read
    (mid,) = [v for v in verdicts if v.name == "mid_stream"]
    assert mid.status == "skip" and "a parallel block" in mid.detail


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
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # the tower runs on every tile and the thumbnail; the projector takes its normed last stream
    assert patches.shape == (CROPS, 16, 64) and torch.equal(selected, tower)
    # each 2 x 2 square of patches is one image token: the features are the projection's rows, crop after crop
    assert projected.shape == (CROPS, 2, 2, 64) and mask.sum() == CROPS * TOKENS_PER_CROP
    assert torch.equal(projected.flatten(0, 2), features)


def test_the_shuffle_folds_each_square_of_patches(model):
    module = model.projector._module
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
    grid = selected.unflatten(1, (4, 4))  # crops, rows, columns, width
    # the token at (row, column) takes patches (2 row + i, 2 column + j), i slowest; no norm before the SwiGLU
    squares = grid.unflatten(1, (2, 2)).unflatten(3, (2, 2)).permute(0, 1, 3, 2, 4, 5).flatten(3)
    with torch.no_grad():
        x, gate = module.linear_1(squares).chunk(2, dim=-1)
        expected = module.linear_2(module.act(gate) * x)
    torch.testing.assert_close(projected, expected)


def test_logits_are_not_scaled(model):
    # Cohere2's own causal LM multiplies by logit_scale; Command A Vision's lm_head does not
    assert model.text_config.logit_scale == 0.3
    with torch.no_grad(), model.trace("Hello world"):
        last = model.layers[-1].layer_output.save()
        logits = model.logits.save()
    with torch.no_grad():
        torch.testing.assert_close(model.lm_head._module(model.norm._module(last)), logits)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()
    assert text.shape[-1] == 64
    assert NO_IMAGE.startswith("this trace passes no image")


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesTransposed(SiglipVision):
    """image_features read at the projector's output with each crop's token grid transposed: the right rows, the wrong order."""

    @EProperty("/projector.output", "The projector's output", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.transpose(1, 2).flatten(0, -2)


FeaturesReturned = features_returned(SiglipVision)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {SiglipAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {SiglipAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {SiglipVisionModel: FeaturesTransposed}, "against image_features: off by"),
        ("written_image_values_move_downstream", {SiglipVisionModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
