"""LLaVA-NeXT, LLaVA-NeXT-Video and LLaVA-OneVision: a tower over anyres crops, and the image features as the text model
receives them, unpadded with newline rows. NeXT-Video adds a video token and processor beside; OneVision's tower is
SigLIP, its projector reads the last block's stream before the final norm, and several images in one prompt are a base
crop each."""

import numpy as np
import pytest
import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import Vision
from vision_harness import ANYRES_BASE, ANYRES_CROPS, ANYRES_MISREAD, ANYRES_TOKENS, VisionFamilyTests, tower_breaks, unpacked_features
from vision_harness import assert_anyres_packed, assert_no_processor, assert_tiny_vit, read
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPVisionModel
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert_tiny_vit(vision)


def is_onevision(model):
    return model.family.name == "llava_onevision"


def test_image_features_are_the_packed_projection(model):
    mask, patches, last, tower, selected, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.layers.-1.layer_output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # the tower and the projector run per crop; the text model receives the packed rows
    assert patches.shape == (ANYRES_CROPS, 16, 64) and projected.shape == (ANYRES_CROPS, 16, 64)
    # OneVision's projector takes the last block's stream, before post_layernorm
    assert torch.equal(selected, last) == is_onevision(model) and not torch.equal(selected, tower)
    assert mask.sum() == ANYRES_TOKENS and features.shape == (ANYRES_TOKENS, 64)
    assert_anyres_packed(model, features, projected)


def test_several_images_in_a_prompt_are_a_base_crop_each(model):
    if not is_onevision(model):
        pytest.skip("LLaVA-NeXT tiles each image of a prompt")
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


def test_a_video_beside_the_image_leaves_the_image_features_alone(tiny_model):
    model = tiny_model("llava_next_video")
    video = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)  # two frames of 32 x 32
    with torch.no_grad(), model.trace("<image>Hello<video> world", images=[image()], videos=[video]):
        ids = model.inputs[1]["input_ids"].save()
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    # each frame's 4 x 4 patches pooled 2 x 2: 4 video tokens a frame, scattered second and not image tokens
    video_tokens = ids == model._module.config.video_token_id
    assert video_tokens.sum() == 8 and not (mask & video_tokens).any()
    assert mask.sum() == ANYRES_TOKENS and torch.equal(stream[mask], features)


def test_no_processor_makes_image_values_unavailable(model, monkeypatch):
    assert_no_processor(model, monkeypatch)


# -- each check fails on a family that breaks what it checks ----------------------------------------


BREAKS = tower_breaks(CLIPAttention, CLIPVisionModel, unpacked_features(Vision), ANYRES_MISREAD, returned=Vision)


class TestLlavaNext(VisionFamilyTests):
    checkpoint = "llava_next"
    breaks = BREAKS


class TestLlavaNextVideo(VisionFamilyTests):
    checkpoint = "llava_next_video"
    breaks = BREAKS


class TestLlavaOnevision(VisionFamilyTests):
    checkpoint = "llava_onevision"
    breaks = tower_breaks(SiglipAttention, SiglipVisionModel, unpacked_features(Vision), ANYRES_MISREAD, returned=Vision)
