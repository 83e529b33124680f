"""LLaVA: the tower's blocks keep the text blocks' identities, and the image features are what the text model receives."""

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_vision.components import Vision
from nnterp_vision.families import llava
from vision_harness import MIXED, PatternAtScores, QueriesKeysSwapped, ValuesAsKeys, VisionFamilyTests, WrongContribution
from vision_harness import assert_no_processor
from vision_harness import assert_tiny_vit, features_at, features_returned, mixed_invoke, read
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert_tiny_vit(vision)
    assert Vision.image_features.dims == ("image_tokens", "hidden_size")


def test_a_tower_block_out_of_range_is_an_index_error_with_the_count(model):
    assert model.vision.layers[-1] is model.vision.layers[1]
    with pytest.raises(IndexError, match=r"vision.layers\[2\] is out of range: vision.layers holds 2 blocks"):
        model.vision.layers[2]


def test_image_features_are_the_projection(model):
    mask, patches, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "projector.projector_output",
        "vision.image_features",
    )
    assert patches.shape == (1, 16, 64) and mask.sum() == 16
    # LLaVA hands the projection on unchanged: its rows, image after image, are the scattered features
    assert torch.equal(projected.flatten(0, 1), features)


def test_no_processor_makes_image_values_unavailable(model, monkeypatch):
    # transformers loads LLaVA under no text-only task (AutoModelForCausalLM has no LlavaConfig), so a
    # load without a processor is this one with the processor taken away
    assert_no_processor(model, monkeypatch)


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    mask, features, stream, logits = mixed_invoke(
        model, "vision.image_token_mask", "vision.image_features", "layers.0.layer_input", "logits"
    )
    two, text = MIXED
    with torch.no_grad(), model.trace(two, images=[image(1), image(2)]):
        two_alone = model.logits.save()
    with torch.no_grad(), model.trace(text):
        text_alone = model.logits.save()
    assert mask[0].sum() == 32 and not mask[1].any() and torch.equal(stream[mask], features)
    # a trace pads on the right: each row's tokens keep their positions, so each row reads as it does alone
    torch.testing.assert_close(logits[0, : two_alone.shape[1]], two_alone[0])
    torch.testing.assert_close(logits[1, : text_alone.shape[1]], text_alone[0])


def test_generate_pads_a_mixed_batch_on_the_tokenizers_side(model):
    with torch.no_grad(), model.generate(["<image>Hi", "The cat sat on the mat"], images=[[image()], []], max_new_tokens=2) as tracer:
        mask = model.vision.image_token_mask.save()
        out = tracer.result.save()
    assert model.tokenizer.padding_side == "left" and mask.shape[0] == 2
    # left padding: the shorter text row starts with padding, so both rows end where generation begins
    alone = len(model.tokenizer("The cat sat on the mat").input_ids)
    padding = mask.shape[1] - alone
    assert padding > 0 and mask[0].sum() == 16 and out.shape == (2, mask.shape[1] + 2)
    assert (out[1, :padding] == model.tokenizer.pad_token_id).all() and (out[1, padding] != model.tokenizer.pad_token_id)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class AlwaysThere(Vision):
    """A tower whose image_features ask nothing of the trace: read on text alone, they would wait for a scatter that never runs."""

    image_features = Vision.image_features.at(unavailable=None)


class FeaturesDoubled(Vision):
    """image_features read at the scatter, but served twice over: a consistent reading of the wrong meaning."""

    image_features = Vision.image_features.scaled(lambda envoy: 2.0)


FeaturesBeforeActivation = features_at(
    Vision, "/projector.linear_1.output", "the projector's first linear layer, before its activation and second layer",
)


FeaturesReturned = features_returned(Vision)


def test_a_projector_named_off_the_path_fails_the_projector_check(model):
    # CLIP's post_layernorm normalizes the pooled class row, which LLaVA never projects: named as the projector,
    # it runs before the scatter, and writing it changes nothing the text model receives
    family = llava.FAMILY.replace(
        name="llava_wrong_projector",
        rename={**{k: v for k, v in llava.FAMILY.rename.items() if v != "projector"}, "model.vision_tower.post_layernorm": "projector"},
        for_config=None,
    )
    assert verdict("projector_output_reaches_the_scatter", model, PROMPTS).status == "pass"
    wrong = StandardizedTransformer(tiny_checkpoint("llava"), family=family, attn_implementation="eager")
    found = verdict("projector_output_reaches_the_scatter", wrong, PROMPTS)
    assert found.status == "fail" and "left image_features unchanged" in found.detail, str(found)


class TestLlava(VisionFamilyTests):
    checkpoint = "llava"
    no_image_values = ("vision.image_features", "vision.layers.0.layer_output")
    breaks = (
        ("vision_contribution", {CLIPAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {CLIPAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("vision_scores_are_queries_against_keys", {CLIPAttention: QueriesKeysSwapped}, "queries @ keys^T against attention_scores"),
        ("vision_head_outputs_are_pattern_against_values", {CLIPAttention: ValuesAsKeys}, "attention_probabilities @ attention_values"),
        ("image_features_reach_the_text", {CLIPVisionModel: FeaturesBeforeActivation}, "against image_features: off by"),
        ("written_image_values_move_downstream", {CLIPVisionModel: FeaturesReturned}, "left the logits unchanged"),
        ("image_reaches_the_text_under_generate", {CLIPVisionModel: FeaturesDoubled}, "against image_features: off by"),
        ("image_values_need_an_image", {CLIPVisionModel: AlwaysThere}, "rather than raising Unavailable"),
    )
