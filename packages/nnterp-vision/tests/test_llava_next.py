"""LLaVA-NeXT: LLaVA's tower over anyres crops, and the image features as the text model receives them, unpadded with newline rows."""

from nnterp_vision.components import Vision
from nnterp_vision.families import llava_next
from nnterp_vision.testing import ANYRES_MISREAD, tower_breaks, unpacked_features, ANYRES_CROPS, ANYRES_TOKENS, VisionFamilyTests
from nnterp_vision.testing import assert_anyres_packed, assert_no_processor, assert_tiny_vit, read
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert_tiny_vit(vision)


def test_image_features_are_the_packed_projection(model):
    mask, patches, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "projector.projector_output",
        "vision.image_features",
    )
    # the tower and the projector run per crop; the text model receives the packed rows
    assert patches.shape == (ANYRES_CROPS, 16, 64) and projected.shape == (ANYRES_CROPS, 16, 64)
    assert mask.sum() == ANYRES_TOKENS and features.shape == (ANYRES_TOKENS, 64)
    assert_anyres_packed(model, features, projected)


def test_no_processor_makes_image_values_unavailable(model, monkeypatch):
    assert_no_processor(model, monkeypatch)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class TestLlavaNext(VisionFamilyTests):
    checkpoint = "llava_next"
    family = llava_next.FAMILY
    breaks = tower_breaks(CLIPAttention, CLIPVisionModel, unpacked_features(Vision), ANYRES_MISREAD, returned=Vision)
