"""PaddleOCR-VL: the packed SigLIP-named tower keeps the blocks' identities, its attention is read whole, and the projector outside it merges what the text model receives."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.paddleocr_vl import PaddleOcrProjector, PaddleOcrVision
from nnterp_vision.components.qwen import QwenVisionAttention
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, OutProjWrongContribution, VisionFamilyTests
from vision_harness import assert_attention_whole
from transformers.models.paddleocr_vl.modeling_paddleocr_vl import PaddleOCRVisionAttention, PaddleOCRVisionModel

PROMPT = "<|IMAGE_PLACEHOLDER|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, PaddleOcrVision) and vision is model.model.visual and model.projector is model.model.projector
    assert isinstance(model.projector, PaddleOcrProjector) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert vision.layers is vision.vision_model.encoder.layers and vision.patch_embed is vision.vision_model.embeddings.patch_embedding
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size) == (8, 64, 2)
    assert model.projector.projector_input_size == 32
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.out_proj and layer.mlp.up_proj is layer.mlp.fc1
    assert layer.input_layernorm is layer.layer_norm1 and layer.mlp.act_fn is layer.mlp.activation_fn


def test_attention_whole_and_the_merge_outside_the_tower(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.detach().clone().save()
        attention = model.vision.layers[1].self_attn
        queries = attention.attention_queries.detach().clone().save()
        keys = attention.attention_keys.detach().clone().save()
        values = attention.attention_values.detach().clone().save()
        heads = attention.attention_head_outputs.detach().clone().save()
        contribution = attention.attention_output.detach().clone().save()
        tower = model.vision.tower_output.detach().clone().save()
        merged_in = model.projector.projector_input.detach().clone().save()
        merged = model.projector.projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
    assert int(mask.sum()) == TOKENS and patches.shape == tower.shape == (1, PATCHES, 32)
    assert queries.shape == keys.shape == values.shape == (1, 2, PATCHES, 16) and heads.shape == (1, PATCHES, 2, 16)
    assert_attention_whole(model, 1, queries, keys, values, heads, contribution)
    # the projector takes the tower's normed output whole and merges 2 x 2; the scatter hands its output on unchanged
    assert torch.equal(merged_in, tower[0]) and merged.shape == (TOKENS, 64) and torch.equal(merged, features)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeMerging(PaddleOcrVision):
    """image_features read at the projector's norm: one row per patch, before the 2 x 2 merge."""

    image_features = PaddleOcrVision.image_features.at("/projector.pre_norm.output", select=None)


class TestPaddleocrVl(VisionFamilyTests):
    checkpoint = "paddleocr_vl"
    breaks = (
        ("vision_contribution", {PaddleOCRVisionAttention: OutProjWrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {PaddleOCRVisionModel: FeaturesBeforeMerging}, "6 image tokens against 24 rows of image_features"),
    )
