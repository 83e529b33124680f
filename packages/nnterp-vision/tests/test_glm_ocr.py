"""GLM-OCR: GLM-4.1V's tower (with q and k norms, no learned positions), merger and text model under GlmOcr* classes."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.glm_ocr import GlmOcrVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glm_ocr
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests
from vision_harness import assert_merge_blocks_are_tokens
from transformers.models.glm_ocr.modeling_glm_ocr import GlmOcrVisionAttention, GlmOcrVisionModel

PROMPT = "<|image|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    vision = model.vision
    assert model.family is glm_ocr.FAMILY and isinstance(vision, GlmOcrVision) and vision is model.model.visual
    assert model.projector is vision.merger and isinstance(model.projector, Glm4vMerger)
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    # the blocks' MLP is intermediate_size wide (128), not out_hidden_size (64) as on GLM-4V
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 128)
    assert vision.layers[0].mlp.up_proj.out_features == 128
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size


def test_queries_and_keys_are_read_after_their_norms(model):
    attention = model.vision.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
    assert queries.shape == keys.shape == values.shape == (1, 2, PATCHES, 16)
    # the norms are per head: one weight of head_dim each
    norms = model.model.visual.blocks[0].attn
    assert norms.q_norm.weight.shape == norms.k_norm.weight.shape == (16,)


def test_merge_blocks_are_image_tokens(model):
    assert_merge_blocks_are_tokens(model, PROMPT, width=32)


def test_glm4v_tower_misreads_the_mlp_width(model):
    """Keyed to GLM-4V's tower component, the tower reports its MLP as out_hidden_size wide, not its real 128."""
    assert TestGlmOcr.broken({GlmOcrVisionModel: Glm4vVision}).vision.intermediate_size == 64


class TestGlmOcr(VisionFamilyTests):
    checkpoint = "glm_ocr"
    breaks = (
        ("vision_contribution", {GlmOcrVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
