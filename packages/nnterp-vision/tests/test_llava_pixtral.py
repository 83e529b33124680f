"""LLaVA on a Pixtral tower: the llava family hands the checkpoint to llava_pixtral, whose packed tower keeps the identities."""

import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import PROMPTS
from nnterp_vision.components.pixtral import PackedProjector, PixtralVision
from nnterp_vision.families import llava, llava_pixtral
from vision_harness import PatternAtScores, VisionFamilyTests, WrongContribution, assert_packed_apart, assert_tiny_pixtral
from vision_harness import features_returned, packed_pair, read
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralVisionModel

PROMPT = "[IMG]Hello world"
#: the checks' 40 x 48 image is kept (its longest side is the tower's 48): 10 x 12 patches of 4 pixels, one image token
#: each (LLaVA merges none)
PATCHES = TOKENS = 120


def test_llava_serves_the_pixtral_tower_through_for_config(model):
    assert model.family is llava_pixtral.FAMILY
    assert llava.for_config({"model_type": "llava", "vision_config": {"model_type": "pixtral"}}) is llava_pixtral.FAMILY
    # a CLIP tower (or a hub config.json naming none) stays with llava itself
    assert llava.for_config({"model_type": "llava", "vision_config": {"model_type": "clip_vision_model"}}) is None
    assert llava.for_config({"model_type": "llava"}) is None
    # an explicit family=llava is refined the same way
    explicit = StandardizedTransformer(tiny_checkpoint("llava_pixtral"), family=llava.FAMILY, attn_implementation="eager")
    assert explicit.family is llava_pixtral.FAMILY


def test_llava_names_do_not_fit_a_pixtral_tower():
    # why llava_pixtral exists: LLaVA's CLIP aliases (layer_norm1, out_proj, fc1 ...) resolve nowhere on Pixtral's modules
    clip = StandardizedTransformer(
        tiny_checkpoint("llava_pixtral"), family=llava.FAMILY.replace(name="llava_as_is", for_config=None), attn_implementation="eager"
    )
    found = verdict("standard_names_alias_native_envoys", clip, PROMPTS)
    assert found.status == "fail", str(found)


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, PixtralVision) and isinstance(model.projector, PackedProjector)
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert_tiny_pixtral(vision)
    assert model.projector.projector_input_size == 64


def test_one_image_is_one_packed_row(model):
    mask, patches, tower, selected, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    assert patches.shape == (1, PATCHES, 64) and tower.shape == (1, PATCHES, 64)
    assert mask.sum() == TOKENS and projected.shape == (1, TOKENS, 64)
    # the projector takes the last block's stream (vision_feature_layer -1, every patch: "full"), packed;
    # LlavaModel splits its rows per image and scatters them unchanged
    assert torch.equal(selected, tower) and torch.equal(projected[0], features)


def test_two_images_pack_under_a_block_diagonal_mask(model):
    mask, patches, pattern, projected, features, stream = packed_pair(
        model, "[IMG]Hello[IMG] world", "vision.image_token_mask", "vision.patch_embeddings",
        "vision.layers.0.self_attn.attention_probabilities", "projector.projector_output", "vision.image_features",
        "layers.0.layer_input",
    )
    assert_packed_apart(patches, pattern, PATCHES)  # the second image's 6 x 4 patches are 24 image tokens, merged by none
    assert mask.sum() == TOKENS + 24 and torch.equal(projected[0], features) and torch.equal(stream[mask], features)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesReturned = features_returned(PixtralVision)


class TestLlavaPixtral(VisionFamilyTests):
    checkpoint = "llava_pixtral"
    no_image_values = ("vision.patch_embeddings", "projector.projector_output")
    breaks = (
        ("vision_contribution", {PixtralAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {PixtralAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("written_image_values_move_downstream", {PixtralVisionModel: FeaturesReturned}, "left the logits unchanged"),
    )
