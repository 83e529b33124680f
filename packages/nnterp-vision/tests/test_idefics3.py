"""Idefics3 and SmolVLM: an Idefics3 ViT, a pixel-shuffle connector, and the image features as the merge writes them in."""

import pytest
import torch
from nnterp_vision.components import ImageScatter, Vision
from nnterp_vision.components.idefics3 import MergerScatter
from nnterp_vision.families import idefics3, smolvlm
from vision_harness import VisionFamilyTests, assert_tiny_vit, features_at, features_returned, read
from transformers.models.idefics3.modeling_idefics3 import Idefics3VisionTransformer
from transformers.models.smolvlm.modeling_smolvlm import SmolVLMVisionTransformer

PROMPT = "<image>Hello world"
FAMILIES = {"idefics3": (idefics3.FAMILY, Idefics3VisionTransformer, MergerScatter), "smolvlm": (smolvlm.FAMILY, SmolVLMVisionTransformer, ImageScatter)}
#: the tiny tower's 16 patches, pixel-shuffled by 2 into 4 image tokens
PATCHES, TOKENS = 16, 4


@pytest.fixture(scope="module")
def name(model):
    return model.family.name


def test_tree_and_sizes(model, name):
    tower, scatter = FAMILIES[name][1], FAMILIES[name][2]
    vision = model.vision
    assert isinstance(vision._module, tower) and vision is model.model.vision_model
    assert model.projector is vision.projector and model.projector is model.model.connector
    assert type(model.model) is scatter
    assert_tiny_vit(vision)
    # the connector takes the tower's width; its linear takes scale_factor ** 2 times that, after the shuffle
    assert (model.projector.projector_input_size, model.projector.scale_factor) == (64, 2)


def test_image_features_are_the_connector_output(model):
    mask, patches, tower, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    assert patches.shape == (1, PATCHES, 64) and mask.sum() == TOKENS
    # the connector takes the tower's last_hidden_state (post_layernorm on every patch) as it is
    assert torch.equal(tower, taken)
    assert projected.shape == (1, TOKENS, 64) and torch.equal(projected.flatten(0, 1), features)


FeaturesScaled = features_at(
    Vision, "/projector.modality_projection.proj.output", "the connector's linear and doubled: the right shape, the wrong tensor",
    rows=lambda value: value.flatten(0, 1) * 2,
)


#: image_features read at the copy the inner model returns after the text model ran: equal, and causally inert
FeaturesReturned = features_returned(Vision)


class TestIdefics3(VisionFamilyTests):
    checkpoint = "idefics3"
    breaks = (
        ("image_features_reach_the_text", {Idefics3VisionTransformer: FeaturesScaled}, "against image_features: off by"),
        ("written_image_values_move_downstream", {Idefics3VisionTransformer: FeaturesReturned}, "left the logits unchanged"),
    )


class TestSmolvlm(VisionFamilyTests):
    checkpoint = "smolvlm"
    breaks = (
        ("image_features_reach_the_text", {SmolVLMVisionTransformer: FeaturesScaled}, "against image_features: off by"),
        ("written_image_values_move_downstream", {SmolVLMVisionTransformer: FeaturesReturned}, "left the logits unchanged"),
    )
