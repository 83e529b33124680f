"""VipLLaVA: LLaVA's tower, a projector over several tower layers, and features scattered per image."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_vision.components import Vision
from nnterp_vision.reasons import NO_PROCESSOR
from vision_harness import PatternAtScores, VisionFamilyTests, WrongContribution, features_returned
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert type(vision) is Vision and vision is model.model.vision_tower
    assert (vision.num_layers, vision.vision_hidden_size, vision.patch_size, vision.image_size) == (2, 64, 8, 32)
    # two tower layers concatenated: twice the tower's width
    assert model.projector.projector_input_size == 128


def test_projector_reads_the_selected_layers(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()  # off the inputs: read before the tower
        before = model.vision.layers[0].layer_input.save()  # hidden_states[0]
        after = model.vision.layers[0].layer_output.save()  # hidden_states[-2]
        taken = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # vision_feature_layer [-2, 0], each without its class row, side by side
    assert torch.equal(taken, torch.cat([after[:, 1:], before[:, 1:]], dim=-1))
    assert mask.sum() == 16 and features.shape == (16, 64)
    assert torch.equal(projected.flatten(0, 1), features)


def test_in_place_edit_of_image_features_lands(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        model.vision.image_features[:] = 0
        edited = model.layers[0].layer_input.save()
    assert edited[mask].abs().max() == 0


def test_no_image_and_no_processor(model, monkeypatch):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()
    monkeypatch.setattr(model, "processor", None)
    assert model.vision.support()["image_features"] == NO_PROCESSOR
    assert verdict("image_features_reach_the_text", model, PROMPTS).status == "skip"


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesReturned = features_returned(Vision)


class TestVipllava(VisionFamilyTests):
    checkpoint = "vipllava"
    breaks = (
        ("vision_contribution", {CLIPAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {CLIPAttention: PatternAtScores}, "against attention_probabilities: off by"),
        # LLaVA's reading, unflattened: one image's features where the check counts rows per token
        ("written_image_values_move_downstream", {CLIPVisionModel: FeaturesReturned}, "left the logits unchanged"),
    )
