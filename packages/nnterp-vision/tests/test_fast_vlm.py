"""FastVLM: a timm FastViT tower served at its stem and its last feature map, its convolutional blocks saying why they serve nothing."""

import pytest
import torch
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import no_images
from nnterp_vision.components.timm import CONV_SIZES, ConvTimmVision
from nnterp_vision.families import fast_vlm
from nnterp_vision.testing import features_returned
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.tiny.fast_vlm import LOAD
from transformers.models.timm_wrapper.modeling_timm_wrapper import TimmWrapperModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
#: the checks that read block values: they skip on FastViT, saying why
BLOCK_CHECKS = ["vision_contribution", "vision_pattern_is_softmax_of_scores", "vision_interior_feeds_the_output"]
PROMPT = "<image>Hello world"
#: every image is 128 pixels a side: a 32 x 32 stem map of 8 channels, a 2 x 2 last map of 64, so 4 image tokens
STEM, TOKENS = 32 * 32, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("fast_vlm")


def broken(envoys):
    """The FastVLM family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("fast_vlm"), family=with_envoys(fast_vlm, envoys), **LOAD)


def statuses(verdicts):
    return {v.name: v.status for v in verdicts}


def expected():
    return {name: "skip" if name in BLOCK_CHECKS else "pass" for name in VISION_CHECKS}


def test_vision_checks_pass_and_block_checks_skip_with_the_reason(model):
    verdicts = run(model, PROMPTS, only=VISION_CHECKS)
    assert statuses(verdicts) == expected(), "\n".join(map(str, verdicts))
    for found in verdicts:
        if found.name in BLOCK_CHECKS:
            assert "FastViT's blocks run on a 2D feature map" in found.detail


@pytest.mark.parametrize("seed", [3, 11, 12])
def test_vision_checks_pass_on_drawn_batches(model, seed):
    case = Case(("The cat sat", "Hello world again"), seed=seed)
    verdicts = [verdict(name, model, case) for name in VISION_CHECKS]
    assert statuses(verdicts) == expected(), "\n".join(map(str, verdicts))


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
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        grid = model.vision.timm_model.final_conv.output.save()
        tower = model.vision.tower_output.save()
        taken = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
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


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.tower_output.save()


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeProjection(ConvTimmVision):
    """image_features read at the projector's second linear's input: the right shape, the wrong tensor."""

    @EProperty("/projector.linear_2.input", "The projector's hidden activations", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


FeaturesReturned = features_returned(ConvTimmVision)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("image_features_reach_the_text", {TimmWrapperModel: FeaturesBeforeProjection}, "against image_features: off by"),
        ("written_image_values_move_downstream", {TimmWrapperModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
