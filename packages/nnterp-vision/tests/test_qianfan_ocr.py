"""Qianfan-OCR: InternVL's layer-scaled InternViT, pixel shuffle and projector under its own classes, on a Qwen3 text model."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import VisionMlp
from nnterp_vision.components.internvl import InternVision, LayerScaledAttention, LayerScaledMlp
from nnterp_vision.families import qianfan_ocr
from nnterp_vision.testing import VisionFamilyTests, WrongContribution, assert_tree, layer_scaled, read
from transformers.models.qianfan_ocr.modeling_qianfan_ocr import QianfanOCRVisionAttention, QianfanOCRVisionMLP

PROMPT = "<image>Hello world"  # the placeholder the processor expands into <IMG_CONTEXT> tokens
#: the checks' 40 x 48 image: 2 x 2 tiles of 16 x 16 and the thumbnail, each 4 x 4 patches (and a class row) shuffled into 4 tokens
CROPS, PATCHES, TOKENS_PER_CROP = 5, 16, 4


def test_tree_and_sizes(model):
    vision = model.vision
    assert model.family is qianfan_ocr.FAMILY and model.config.text_config.model_type == "qwen3"
    assert_tree(model, InternVision, "model.vision_tower", None, "vision.projector")
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (4, 16, 128)
    assert model.projector.projector_input_size == 4 * 64
    block = vision.layers[0]
    assert isinstance(block.self_attn, LayerScaledAttention) and isinstance(block.mlp, LayerScaledMlp)
    assert block.self_attn.o_proj is block.self_attn.projection_layer and block.mlp.up_proj is block.mlp.fc1


def test_prompts_hold_the_placeholder_the_processor_expands(model):
    assert (model.processor.image_placeholder_token, model.processor.image_token) == ("<image>", "<IMG_CONTEXT>")
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
    assert mask.sum() > 0


def test_contributions_are_the_layer_scaled_outputs(model):
    layer_scaled(model, PROMPT)


def test_the_class_row_is_dropped_and_the_crops_shuffled_into_tokens(model):
    mask, tower, selected, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.tower_output", "projector.projector_input",
        "projector.projector_output", "vision.image_features",
    )
    assert tower.shape == (CROPS, 1 + PATCHES, 64) and selected.shape == (CROPS, TOKENS_PER_CROP, 4 * 64)
    assert int(mask.sum()) == CROPS * TOKENS_PER_CROP and torch.equal(projected.flatten(0, 1), features)


class TestQianfanOcr(VisionFamilyTests):
    checkpoint = "qianfan_ocr"
    family = qianfan_ocr.FAMILY
    breaks = (
        # the MLP's contribution read before the block's layer scale
        ("vision_contribution", {QianfanOCRVisionMLP: VisionMlp}, "against layer_output: off by"),
        ("vision_contribution", {QianfanOCRVisionAttention: WrongContribution}, "against layer_output: off by"),
    )
