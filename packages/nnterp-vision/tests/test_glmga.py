"""GLMGA: GLM-4.6V's class and modules under its own config type, served by the glm46v tables."""

import pytest
from nnterp import Unavailable
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glmga
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests
from vision_harness import assert_merge_blocks_are_tokens, assert_tree
from transformers.models.glm46v.modeling_glm46v import Glm46VForConditionalGeneration
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention

PROMPT = "<|image|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    assert model.family is glmga.FAMILY and type(model._module) is Glm46VForConditionalGeneration
    vision = model.vision
    assert_tree(model, Glm4vVision, "model.visual", Glm4vMerger, "vision.merger")
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 64)
    assert (model.num_layers, model.hidden_size) == (2, 64)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size


def test_the_processor_is_the_types_own(model):
    processor = model.processor
    assert type(processor.image_processor).__name__.startswith("GlmgaImageProcessor") and processor.image_processor.patch_expand_factor == 1


def test_merge_blocks_are_image_tokens(model):
    assert_merge_blocks_are_tokens(model, PROMPT, width=32)


class TestGlmga(VisionFamilyTests):
    checkpoint = "glmga"
    breaks = (
        ("vision_contribution", {Glm4vVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
