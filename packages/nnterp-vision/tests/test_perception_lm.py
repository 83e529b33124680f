"""PerceptionLM: a timm Perception Encoder whose ViT blocks keep the text blocks' identities, one tower row per tile, a pooling projector."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_vision.components.timm import FUSED, TIMM_INTERIOR, TimmAttention, TimmVision
from vision_harness import VisionFamilyTests, read
from timm.layers import AttentionRope

PROMPT = "<|image|>Hello world"
#: each image is a thumbnail and one tile of 32 pixels: 4 x 4 patches of 8 and the class row, pooled 2 x 2 into 4 tokens
TILES, ROWS, TOKENS = 2, 17, 8


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, TimmVision) and vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size, vision.num_prefix_tokens) == (8, 32, 128, 1)
    assert model.projector.projector_input_size == 64
    block = vision.layers[0]
    assert block.self_attn is block.attn and block.self_attn.o_proj is block.attn.proj
    assert block.input_layernorm is block.norm1 and block.post_attention_layernorm is block.norm2
    assert block.mlp.up_proj is block.mlp.fc1 and block.mlp.down_proj is block.mlp.fc2
    # an eager load turns timm's fused kernel off, so the pattern is materialized; the rest of the interior is not served
    assert block.self_attn._module.fused_attn is False
    support = vision.support()
    assert support["self_attn.attention_probabilities"] is None
    assert set(support["self_attn.attention_queries"].values()) == {TIMM_INTERIOR}


def test_tiles_run_as_rows_and_the_projector_pools(model):
    mask, patches, tower, taken, projected, features, stream = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features", "layers.0.layer_input",
    )
    # the thumbnail and the tile are two rows of the tower; the class row leads, and the wrapper drops it
    assert patches.shape == (TILES, ROWS - 1, 64) and tower.shape == (TILES, ROWS, 64)
    assert torch.equal(taken, tower[:, 1:])
    assert projected.shape == (TILES, TOKENS // TILES, 64) and mask.sum() == TOKENS
    assert torch.equal(projected.flatten(0, 1), features) and torch.equal(stream[mask], features)
    # each output row is a 2 x 2 average of the projected patch grid
    module = model.projector._module
    per_patch = module.linear_2(module.gelu(module.linear_1(taken)))
    grid = per_patch.transpose(1, 2).reshape(TILES, 64, 4, 4)
    expected = torch.nn.functional.avg_pool2d(grid, 2).flatten(2).transpose(1, 2)
    torch.testing.assert_close(projected, expected)


def test_contribution_is_after_the_layer_scale(model):
    raw, added = read(model, PROMPT, "vision.layers.0.self_attn.output", "vision.layers.0.self_attn.attention_output")
    scale = model.vision.layers[0]._module.gamma_1
    torch.testing.assert_close(added, raw * scale)


def test_fused_load_says_why_the_pattern_is_missing(tiny_model):
    fused = tiny_model("perception_lm", attn_implementation="sdpa")
    attention = fused.vision.layers[0].self_attn
    assert attention._module.fused_attn is True
    with pytest.raises(Unavailable, match="scaled_dot_product_attention"):
        attention.attention_probabilities
    assert FUSED in str(fused.vision.support()["self_attn.attention_scores"])


def test_a_load_without_dispatch_is_dispatched_by_the_family():

    model = StandardizedTransformer(tiny_checkpoint("perception_lm"), attn_implementation="eager")
    assert model.dispatched and next(model._module.parameters()).device.type == "cpu"


# -- each check fails on a family that breaks what it checks ----------------------------------------


class BeforeLayerScale(TimmAttention):
    """The contribution read at the attention's own output, before the block's layer scale."""

    attention_output = TimmAttention.attention_output.at("output")


class PatternAtScores(TimmAttention):
    """The pattern read at the scores entering the softmax."""

    attention_probabilities = TimmAttention.attention_probabilities.at("source.maybe_add_mask_0.output")


class TestPerceptionLm(VisionFamilyTests):
    checkpoint = "perception_lm"
    no_image_values = ("vision.tower_output",)
    breaks = (
        ("vision_contribution", {AttentionRope: BeforeLayerScale}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {AttentionRope: PatternAtScores}, "against attention_probabilities: off by"),
    )
