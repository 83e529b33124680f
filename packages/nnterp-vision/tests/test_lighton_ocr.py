"""LightOnOCR: Mistral 3's packed Pixtral tower and patch merger under other paths, on a Qwen3 text model."""

import torch
from nnterp_vision.components.pixtral import PatchMergerProjector, PixtralVision
from vision_harness import PatternAtScores, VisionFamilyTests, WrongContribution, assert_one_packed_row
from vision_harness import assert_packed_apart, assert_tiny_pixtral, features_at, features_returned, packed_pair
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralVisionModel

PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image is kept (its longest side is the tower's 48): 10 x 12 patches of 4 pixels, merged 2 x 2 into 5 x 6 tokens
PATCHES, TOKENS = 120, 30


def test_tree_and_sizes(model):
    vision, projector = model.vision, model.projector
    assert isinstance(vision, PixtralVision) and isinstance(projector, PatchMergerProjector)
    assert vision is model.model.vision_encoder and projector is model.model.vision_projection is vision.projector
    assert_tiny_pixtral(vision)
    assert projector.projector_input_size == 64
    # Qwen3's text attention normalizes its queries and keys per head
    assert hasattr(model.layers[0].self_attn, "q_norm") and model.layers[0] is model.model.language_model.layers[0]


def test_one_image_is_one_packed_row_merged_into_the_tokens(model):
    # the projector takes the tower's last stream, squeezed; its rows are the scattered features
    assert_one_packed_row(model, PROMPT, PATCHES, TOKENS)


def test_two_images_pack_under_a_block_diagonal_mask(model):
    mask, patches, pattern, features, stream = packed_pair(
        model, f"{PROMPT}{PROMPT[:13]} again", "vision.image_token_mask", "vision.patch_embeddings",
        "vision.layers.0.self_attn.attention_probabilities", "vision.image_features", "layers.0.layer_input",
    )
    assert_packed_apart(patches, pattern, PATCHES)  # the second image's 6 x 4 patches merge into 3 x 2 image tokens
    assert mask.sum() == TOKENS + 6 and torch.equal(stream[mask], features)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesReturned = features_returned(PixtralVision)


FeaturesBeforeMerge = features_at(
    PixtralVision, "/projector.input", "the projector's input: one row per patch, not per merged token",
    rows=lambda value: value,
)


class TestLightonOcr(VisionFamilyTests):
    checkpoint = "lighton_ocr"
    no_image_values = ("vision.patch_embeddings",)
    breaks = (
        ("vision_contribution", {PixtralAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {PixtralAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {PixtralVisionModel: FeaturesBeforeMerge}, f"{TOKENS} image tokens against {PATCHES} rows"),
        ("written_image_values_move_downstream", {PixtralVisionModel: FeaturesReturned}, "left the logits unchanged"),
    )
