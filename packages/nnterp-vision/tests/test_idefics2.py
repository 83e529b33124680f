"""Idefics2: Idefics3's tower and merge, its patches resampled by a perceiver to a fixed number of image tokens."""

import torch
from nnsight.intervention.envoy import Envoy
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import Vision
from nnterp_vision.components.idefics2 import PerceiverConnector
from nnterp_vision.components.idefics3 import MergerScatter
from vision_harness import assert_mixed_invoke_scatters, PatternAtScores, VisionFamilyTests, WrongContribution
from vision_harness import assert_tiny_vit, features_at, read
from transformers.models.idefics2.modeling_idefics2 import Idefics2VisionAttention, Idefics2VisionTransformer

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_model and model.projector is model.model.connector
    assert isinstance(model.projector, PerceiverConnector) and isinstance(model.model, MergerScatter)
    assert_tiny_vit(vision)
    assert model.projector.projector_input_size == 64 and model.projector.resampler_n_latents == 4
    # the resampler's blocks are not the text model's: plain envoys, and the text model keeps its two layers
    block = model.projector.perceiver_resampler.layers[0]
    assert type(block) is Envoy and type(block.self_attn) is Envoy and type(block.mlp) is Envoy and len(model.layers) == 2


def test_connector_resamples_tower_output_to_latents(model):
    mask, tower, taken, projected, resampled, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.tower_output", "projector.projector_input",
        "projector.modality_projection.output", "projector.projector_output", "vision.image_features",
    )
    # 16 patches in, projected to the text width row by row, resampled to 4 latents: 4 image tokens
    assert tower.shape == (1, 16, 64) and torch.equal(taken, tower) and projected.shape == (1, 16, 64)
    assert resampled.shape == (1, 4, 64) and mask.sum() == 4
    assert torch.equal(resampled.flatten(0, 1), features)


def test_image_tokens_sit_between_fake_tokens(model):
    ids = model.processor(text=PROMPT, images=[image()], return_tensors="pt")["input_ids"][0].tolist()
    fake, token = model.processor.tokenizer.convert_tokens_to_ids("<fake_token_around_image>"), model.processor.image_token_id
    start = ids.index(fake)
    assert ids[start + 1 : start + 5] == [token] * 4 and ids[start + 5] == fake and token == 301


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    assert_mixed_invoke_scatters(model, 8)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeNorm = features_at(
    Vision, "/projector.perceiver_resampler.layers.1.output",
    "the resampler's last block, before its final norm: the right shape, the wrong tensor",
)


class TestIdefics2(VisionFamilyTests):
    checkpoint = "idefics2"
    no_image_values = ("projector.projector_output",)
    breaks = (
        ("vision_contribution", {Idefics2VisionAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {Idefics2VisionAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {Idefics2VisionTransformer: FeaturesBeforeNorm}, "against image_features: off by"),
    )
