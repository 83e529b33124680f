"""LLaVA: the tower's blocks keep the text blocks' identities, and the image features are what the text model receives."""

import types

import pytest
import torch
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import Vision, no_images
from nnterp_vision.families import llava
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.reasons import NO_IMAGE, NO_PROCESSOR
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<image>Hello world"


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("llava")


def broken(envoys):
    """The LLaVA family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("llava"), family=with_envoys(llava, envoys), attn_implementation="eager")


def test_vision_checks_pass(model):
    assert sorted(VISION_CHECKS) == sorted(
        [
            "vision_contribution", "vision_pattern_is_softmax_of_scores", "vision_interior_feeds_the_output",
            "image_features_reach_the_text",
            "written_image_values_move_downstream", "projector_output_reaches_the_scatter",
            "image_reaches_the_text_under_generate", "image_values_need_an_image",
        ]
    )
    verdicts = run(model, PROMPTS, only=VISION_CHECKS)
    assert [v.status for v in verdicts] == ["pass"] * len(VISION_CHECKS), "\n".join(map(str, verdicts))


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj
    assert Vision.image_features.dims == ("image_tokens", "hidden_size")


def test_a_tower_block_out_of_range_is_an_index_error_with_the_count(model):
    assert model.vision.layers[-1] is model.vision.layers[1]
    with pytest.raises(IndexError, match=r"vision.layers\[2\] is out of range: vision.layers holds 2 blocks"):
        model.vision.layers[2]


def test_image_features_are_the_projection(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    assert patches.shape == (1, 16, 64) and mask.sum() == 16
    # LLaVA hands the projection on unchanged: its rows, image after image, are the scattered features
    assert torch.equal(projected.flatten(0, 1), features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.layers[0].layer_output.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()  # the text model's values are untouched
    assert text.shape[-1] == 64
    assert NO_IMAGE.startswith("this trace passes no image")


def test_no_processor_makes_image_values_unavailable(model, monkeypatch):
    # transformers loads LLaVA under no text-only task (AutoModelForCausalLM has no LlavaConfig), so a
    # load without a processor is this one with the processor taken away
    monkeypatch.setattr(model, "processor", None)
    support = model.vision.support()
    assert support["image_features"] == NO_PROCESSOR and support["layer_output"] == {0: NO_PROCESSOR, 1: NO_PROCESSOR}
    assert verdict("image_features_reach_the_text", model, PROMPTS).status == "skip"


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    two, text = "<image>Hello<image> world", "The cat sat on the mat again"
    pictures = [image(1), image(2)]
    with torch.no_grad(), model.trace([two, text], images=[pictures, []]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
        logits = model.logits.save()
    with torch.no_grad(), model.trace(two, images=pictures):
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


def test_text_only_check_fails_where_image_values_read_without_an_image(model):
    assert verdict("image_values_need_an_image", model, PROMPTS).status == "pass"
    found = verdict("image_values_need_an_image", broken({CLIPVisionModel: AlwaysThere}), PROMPTS)
    assert found.status == "fail" and "rather than raising Unavailable" in found.detail, str(found)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class AlwaysThere(Vision):
    """A tower whose image_features ask nothing of the trace: read on text alone, they would wait for a scatter that never runs."""

    image_features = Vision.image_features.at(unavailable=None)


class FeaturesDoubled(Vision):
    """image_features read at the scatter, but served twice over: a consistent reading of the wrong meaning."""

    image_features = Vision.image_features.scaled(lambda envoy: 2.0)


class FeaturesBeforeActivation(Vision):
    """image_features read at the projector's first linear layer, before its activation and second layer."""

    @EProperty("/projector.linear_1.output", "The projector's first layer", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


FeaturesReturned = features_returned(Vision)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {CLIPAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {CLIPAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {CLIPVisionModel: FeaturesBeforeActivation}, "against image_features: off by"),
        ("written_image_values_move_downstream", {CLIPVisionModel: FeaturesReturned}, "left the logits unchanged"),
        ("image_reaches_the_text_under_generate", {CLIPVisionModel: FeaturesDoubled}, "against image_features: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)


def test_a_projector_named_off_the_path_fails_the_projector_check(model):
    # CLIP's post_layernorm normalizes the pooled class row, which LLaVA never projects: named as the projector,
    # it runs before the scatter, and writing it changes nothing the text model receives
    family = types.ModuleType("llava_wrong_projector")
    family.__dict__.update({key: value for key, value in vars(llava).items() if not key.startswith("_")})
    family.RENAME = {**{k: v for k, v in llava.RENAME.items() if v != "projector"}, "model.vision_tower.post_layernorm": "projector"}
    assert verdict("projector_output_reaches_the_scatter", model, PROMPTS).status == "pass"
    wrong = StandardizedTransformer(tiny_checkpoint("llava"), family=family, attn_implementation="eager")
    found = verdict("projector_output_reaches_the_scatter", wrong, PROMPTS)
    assert found.status == "fail" and "left image_features unchanged" in found.detail, str(found)
