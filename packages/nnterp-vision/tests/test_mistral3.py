"""Mistral 3: a Pixtral tower, packed, whose blocks keep the text blocks' identities, and a patch merger whose rows reach the text."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks.vision import image
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components.pixtral import VARIABLE_RESOLUTION, PixtralVision
from nnterp_vision.families import mistral3
from nnterp_vision.reasons import NO_IMAGE
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralVisionModel

PROMPT = "[IMG]Hello world"
#: the checks' 40 x 48 image is kept (its longest side is the tower's 48) and padded to 8-pixel merge units:
#: 10 x 12 patches of 4 pixels, merged 2 x 2 into 5 x 6 image tokens
PATCHES, TOKENS = 120, 30

@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("mistral3")

def broken(envoys):
    """The Mistral 3 family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("mistral3"), family=with_envoys(mistral3, envoys), attn_implementation="eager")


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, PixtralVision)
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, model.projector.projector_input_size) == (4, 128, 64)
    block = vision.layers[0]
    assert block.self_attn is block.attention and block.mlp is block.feed_forward
    assert block.input_layernorm is block.attention_norm and block.post_attention_layernorm is block.ffn_norm
    with pytest.raises(Unavailable, match="takes any resolution"):
        vision.image_size
    assert VARIABLE_RESOLUTION.startswith("the tower takes any resolution")

def test_one_image_is_one_packed_row(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    assert patches.shape == (1, PATCHES, 64) and tower.shape == (1, PATCHES, 64)
    assert mask.sum() == TOKENS and projected.shape == (TOKENS, 64)
    # the projector takes the last block's stream (vision_feature_layer -1), squeezed; its rows are the scattered features
    assert torch.equal(selected, tower[0]) and torch.equal(projected, features)

def test_two_images_pack_under_a_block_diagonal_mask(model):
    small = image(1).resize((16, 24))  # 24 high, 16 wide: 6 x 4 patches, 3 x 2 image tokens
    with torch.no_grad(), model.trace("[IMG]Hello[IMG] world", images=[image(), small]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        pattern = model.vision.layers[0].self_attn.attention_probabilities.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    assert patches.shape == (1, PATCHES + 24, 64) and pattern.shape == (1, 4, PATCHES + 24, PATCHES + 24)
    # no patch attends to the other image's
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

@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {PixtralAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {PixtralAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("written_image_values_move_downstream", {PixtralVisionModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
