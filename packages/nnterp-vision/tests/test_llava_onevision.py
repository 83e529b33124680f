"""LLaVA-OneVision: LLaVA-NeXT's anyres packing on a SigLIP tower; several images in one prompt are a base crop each."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import Vision
from nnterp_vision.families import llava_onevision
from nnterp_vision.testing import ANYRES_MISREAD, tower_breaks, unpacked_features, ANYRES_BASE, ANYRES_CROPS, ANYRES_TOKENS, VisionFamilyTests
from nnterp_vision.testing import assert_anyres_packed, assert_tiny_vit, read
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert_tiny_vit(vision)


def test_image_features_are_the_packed_projection(model):
    mask, patches, last, tower, selected, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.layers.-1.layer_output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # the tower and the projector run per crop, on the last block's stream before post_layernorm
    assert patches.shape == (ANYRES_CROPS, 16, 64) and projected.shape == (ANYRES_CROPS, 16, 64)
    assert torch.equal(selected, last) and not torch.equal(selected, tower)
    assert mask.sum() == ANYRES_TOKENS and features.shape == (ANYRES_TOKENS, 64)
    assert_anyres_packed(model, features, projected)


def test_several_images_in_a_prompt_are_a_base_crop_each(model):
    # the images nested one list per prompt (flat, the image processor counts each as a prompt of its own and tiles it)
    with torch.no_grad(), model.trace("<image>Hello<image> world", images=[[image(), image(3)]]):
        mask = model.vision.image_token_mask.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # no tiles: each image's 16 rows, then one newline row
    newline = model.model.image_newline.detach()
    assert projected.shape == (2, ANYRES_BASE, 64) and mask.sum() == 2 * (ANYRES_BASE + 1)
    each = features.unflatten(0, (2, ANYRES_BASE + 1))
    assert torch.equal(each[:, :ANYRES_BASE], projected) and torch.equal(each[:, -1], newline.expand(2, -1))


# -- each check fails on a family that breaks what it checks ----------------------------------------


class TestLlavaOnevision(VisionFamilyTests):
    checkpoint = "llava_onevision"
    family = llava_onevision.FAMILY
    breaks = tower_breaks(SiglipAttention, SiglipVisionModel, unpacked_features(Vision), ANYRES_MISREAD, returned=Vision)
