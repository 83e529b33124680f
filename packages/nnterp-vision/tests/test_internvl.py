"""InternVL and Qianfan-OCR: an InternViT over tiles whose blocks scale their contributions, a pixel shuffle before the
projector, a Qwen2 (InternVL) or Qwen3 (Qianfan-OCR, the same pieces under its own classes) text model."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import VisionAttention, VisionMlp
from nnterp_vision.components.internvl import InternVision, LayerScaledAttention, LayerScaledMlp
from nnterp_vision.families import qianfan_ocr
from vision_harness import PatternAtScores, VisionFamilyTests, WrongContribution
from vision_harness import assert_tree, features_at, features_returned, layer_scaled, read, shuffled_squares
from transformers.models.internvl.modeling_internvl import InternVLVisionAttention, InternVLVisionModel
from transformers.models.qianfan_ocr.modeling_qianfan_ocr import QianfanOCRVisionAttention, QianfanOCRVisionMLP

#: each checkpoint's prompt: Qianfan-OCR's processor expands its <image> placeholder into <IMG_CONTEXT> tokens
PROMPTS = {"internvl": "<IMG_CONTEXT>Hello world", "qianfan_ocr": "<image>Hello world"}
#: each checkpoint's text model
TEXT_MODEL_TYPES = {"internvl": "qwen2", "qianfan_ocr": "qwen3"}
#: the checks' 40 x 48 image: 2 x 2 tiles of 16 x 16 and the thumbnail, each 4 x 4 patches (and a class row) shuffled into 4 tokens
CROPS, PATCHES, TOKENS_PER_CROP = 5, 16, 4


def test_tree_and_sizes(model):
    vision = model.vision
    assert model.config.text_config.model_type == TEXT_MODEL_TYPES[model.family.name]
    assert_tree(model, InternVision, "model.vision_tower", None, "vision.projector")
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    # the config's (height, width) pairs, one side each
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (4, 16, 128)
    assert model.projector.projector_input_size == 4 * 64
    block = vision.layers[0]
    assert isinstance(block.self_attn, LayerScaledAttention) and isinstance(block.mlp, LayerScaledMlp)
    assert block.self_attn is block.attention and block.self_attn.o_proj is block.self_attn.projection_layer
    assert block.input_layernorm is block.layernorm_before and block.post_attention_layernorm is block.layernorm_after
    assert block.mlp.up_proj is block.mlp.fc1


def test_prompts_hold_the_placeholder_the_processor_expands(model):
    assert model.processor.image_token == "<IMG_CONTEXT>"
    if model.family is qianfan_ocr.FAMILY:
        assert model.processor.image_placeholder_token == "<image>"
    with torch.no_grad(), model.trace(PROMPTS[model.family.name], images=[image()]):
        mask = model.vision.image_token_mask.save()
    assert mask.sum() == CROPS * TOKENS_PER_CROP


def test_contributions_are_the_layer_scaled_outputs(model):
    prompt = PROMPTS[model.family.name]
    attention = layer_scaled(model, prompt)
    block = model.vision.layers[0]
    # a written contribution is divided back: doubling it doubles what the block adds
    with torch.no_grad(), model.trace(prompt, images=[image()]):
        block.self_attn.attention_output = block.self_attn.attention_output * 2
        doubled = block.self_attn.output[0].save()
    torch.testing.assert_close(doubled, attention * 2)


def test_the_class_row_is_dropped_and_the_patches_shuffled(model):
    mask, patches, tower, selected, projected, features = read(
        model, PROMPTS[model.family.name], "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # the blocks carry the class row first; the projector receives each 2 x 2 square of the other rows as one
    assert patches.shape == (CROPS, PATCHES, 64) and tower.shape == (CROPS, 1 + PATCHES, 64)
    assert torch.equal(selected, shuffled_squares(tower[:, 1:]).flatten(1, 2))
    assert projected.shape == (CROPS, TOKENS_PER_CROP, 64) and mask.sum() == CROPS * TOKENS_PER_CROP
    assert torch.equal(projected.flatten(0, 1), features)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class UnscaledAttention(VisionAttention):
    """The attention's contribution read at its output, before the block's layer scale: InternViT read as a plain ViT."""


FeaturesBeforeActivation = features_at(
    InternVision, "/projector.linear_1.output", "the projector's first linear layer, before its activation and second layer",
)


FeaturesReturned = features_returned(InternVision)


class TestInternvl(VisionFamilyTests):
    checkpoint = "internvl"
    breaks = (
        ("vision_contribution", {InternVLVisionAttention: UnscaledAttention}, "against layer_output: off by"),
        ("vision_contribution", {InternVLVisionAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {InternVLVisionAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {InternVLVisionModel: FeaturesBeforeActivation}, "against image_features: off by"),
        ("written_image_values_move_downstream", {InternVLVisionModel: FeaturesReturned}, "left the logits unchanged"),
    )


class TestQianfanOcr(VisionFamilyTests):
    checkpoint = "qianfan_ocr"
    breaks = (
        # the MLP's contribution read before the block's layer scale
        ("vision_contribution", {QianfanOCRVisionMLP: VisionMlp}, "against layer_output: off by"),
        ("vision_contribution", {QianfanOCRVisionAttention: WrongContribution}, "against layer_output: off by"),
    )
