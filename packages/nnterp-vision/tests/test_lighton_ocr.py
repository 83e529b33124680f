"""LightOnOCR: Mistral 3's packed Pixtral tower and patch merger under other paths, on a Qwen3 text model."""

import pytest
import torch
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import no_images
from nnterp_vision.components.pixtral import PatchMergerProjector, PixtralVision
from nnterp_vision.families import lighton_ocr
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.reasons import NO_IMAGE
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image is kept (its longest side is the tower's 48): 10 x 12 patches of 4 pixels, merged 2 x 2 into 5 x 6 tokens
PATCHES, TOKENS = 120, 30


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("lighton_ocr")


def broken(envoys):
    """The LightOnOCR family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("lighton_ocr"), family=with_envoys(lighton_ocr, envoys), attn_implementation="eager")


@pytest.mark.parametrize("seed", [0, 3, 11, 12])
def test_vision_checks_pass_on_drawn_cases(model, seed):
    case = Case(("The cat sat", "Hello world again"), seed=seed)
    verdicts = [verdict(name, model, case) for name in VISION_CHECKS]
    assert [v.status for v in verdicts] == ["pass"] * len(VISION_CHECKS), "\n".join(map(str, verdicts))


def test_tree_and_sizes(model):
    vision, projector = model.vision, model.projector
    assert isinstance(vision, PixtralVision) and isinstance(projector, PatchMergerProjector)
    assert vision is model.model.vision_encoder and projector is model.model.vision_projection is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, projector.projector_input_size) == (4, 128, 64)
    block = vision.layers[0]
    assert block.self_attn is block.attention and block.mlp is block.feed_forward
    assert block.input_layernorm is block.attention_norm and block.post_attention_layernorm is block.ffn_norm
    # Qwen3's text attention normalizes its queries and keys per head
    assert hasattr(model.layers[0].self_attn, "q_norm") and model.layers[0] is model.model.language_model.layers[0]
    with pytest.raises(Unavailable, match="takes any resolution"):
        vision.image_size


def test_one_image_is_one_packed_row_merged_into_the_tokens(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    assert patches.shape == (1, PATCHES, 64) and tower.shape == (1, PATCHES, 64)
    assert mask.sum() == TOKENS and projected.shape == (TOKENS, 64)
    # the projector takes the tower's last stream, squeezed; its rows are the scattered features
    assert torch.equal(selected, tower[0]) and torch.equal(projected, features)


def test_two_images_pack_under_a_block_diagonal_mask(model):
    small = image(1).resize((16, 24))  # 24 high, 16 wide: 6 x 4 patches, 3 x 2 image tokens
    with torch.no_grad(), model.trace(f"{PROMPT}{PROMPT[:13]} again", images=[image(), small]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        pattern = model.vision.layers[0].self_attn.attention_probabilities.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    assert patches.shape == (1, PATCHES + 24, 64) and pattern.shape == (1, 4, PATCHES + 24, PATCHES + 24)
    assert pattern[..., :PATCHES, PATCHES:].abs().max() == 0 and pattern[..., PATCHES:, :PATCHES].abs().max() == 0
    assert mask.sum() == TOKENS + 6 and torch.equal(stream[mask], features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.patch_embeddings.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()
    assert text.shape[-1] == 64
    assert NO_IMAGE.startswith("this trace passes no image")


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesReturned = features_returned(PixtralVision)


class FeaturesBeforeMerge(PixtralVision):
    """image_features read at the projector's input: one row per patch, not per merged token."""

    @EProperty("/projector.input", "The projector's input", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {PixtralAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {PixtralAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {PixtralVisionModel: FeaturesBeforeMerge}, f"{TOKENS} image tokens against {PATCHES} rows"),
        ("written_image_values_move_downstream", {PixtralVisionModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
