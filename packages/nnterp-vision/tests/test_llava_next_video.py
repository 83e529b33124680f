"""LLaVA-NeXT-Video: LLaVA-NeXT on images (anyres crops, unpadded with newline rows), with a video token and processor beside."""

import numpy as np
import pytest
import torch
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import Vision, no_images
from nnterp_vision.families import llava_next_video
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.reasons import NO_IMAGE, NO_PROCESSOR
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<image>Hello world"
#: the checks' 40 x 48 image on the tiny grid pinpoints: the base crop and the four tiles of 64 x 64
CROPS = 5
#: its image tokens: the base crop's 16, then the 8 x 8 tile grid unpadded to 6 rows of 8, each row closed by a newline
BASE, ROWS, COLUMNS = 16, 6, 8
TOKENS = BASE + ROWS * (COLUMNS + 1)


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("llava_next_video")


def broken(envoys):
    """The LLaVA-NeXT-Video family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("llava_next_video"), family=with_envoys(llava_next_video, envoys), attn_implementation="eager")


@pytest.mark.parametrize("seed", [0, 3, 11, 12])
def test_vision_checks_pass_on_drawn_cases(model, seed):
    case = Case(("The cat sat", "Hello world again"), seed=seed)
    verdicts = [verdict(name, model, case) for name in VISION_CHECKS]
    assert [v.status for v in verdicts] == ["pass"] * len(VISION_CHECKS), "\n".join(map(str, verdicts))


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj


def test_image_features_are_the_packed_projection(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # the tower and the projector run per crop; the text model receives the packed rows
    assert patches.shape == (CROPS, 16, 64) and projected.shape == (CROPS, 16, 64)
    assert mask.sum() == TOKENS and features.shape == (TOKENS, 64)
    assert torch.equal(features[:BASE], projected[0])
    grid = features[BASE:].unflatten(0, (ROWS, COLUMNS + 1))
    newline = model.model.image_newline.detach()
    assert torch.equal(grid[:, -1], newline.expand(ROWS, -1))
    # each unpadded row's features are the projection's, from the tile it falls in (one padded row cropped off the top)
    tiles = projected[1:].unflatten(0, (2, 2)).unflatten(2, (COLUMNS // 2, COLUMNS // 2))  # tile row, tile column, row, column
    full = tiles.permute(0, 2, 1, 3, 4).flatten(2, 3).flatten(0, 1)  # [8 rows, 8 columns, hidden]
    assert torch.equal(grid[:, :-1], full[1 : 1 + ROWS])


def test_a_video_beside_the_image_leaves_the_image_features_alone(model):
    video = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)  # two frames of 32 x 32
    with torch.no_grad(), model.trace("<image>Hello<video> world", images=[image()], videos=[video]):
        ids = model.inputs[1]["input_ids"].save()
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    # each frame's 4 x 4 patches pooled 2 x 2: 4 video tokens a frame, scattered second and not image tokens
    video_tokens = ids == model._module.config.video_token_id
    assert video_tokens.sum() == 8 and not (mask & video_tokens).any()
    assert mask.sum() == TOKENS and torch.equal(stream[mask], features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()
    assert text.shape[-1] == 64
    assert NO_IMAGE.startswith("this trace passes no image")


def test_no_processor_makes_image_values_unavailable(model, monkeypatch):
    monkeypatch.setattr(model, "processor", None)
    support = model.vision.support()
    assert support["image_features"] == NO_PROCESSOR and support["layer_output"] == {0: NO_PROCESSOR, 1: NO_PROCESSOR}
    assert verdict("image_features_reach_the_text", model, PROMPTS).status == "skip"


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesAtProjector(Vision):
    """image_features read at the projector's output, every crop's rows: LLaVA's reading, before NeXT's packing."""

    @EProperty("/projector.output", "The projector's output", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


FeaturesReturned = features_returned(Vision)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {CLIPAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {CLIPAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {CLIPVisionModel: FeaturesAtProjector}, f"{TOKENS} image tokens against {CROPS * 16} rows"),
        ("written_image_values_move_downstream", {CLIPVisionModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
