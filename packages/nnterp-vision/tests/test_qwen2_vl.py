"""Qwen2-VL: the packed Qwen ViT's blocks keep the text blocks' identities, its attention is read whole, and the merged features are what the text model receives."""

import pytest
import torch


from nnterp import Unavailable  # noqa: E402
from nnterp_conformance.checks.vision import image  # noqa: E402
from nnterp_vision.components.qwen import PER_IMAGE, QwenVision  # noqa: E402
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, assert_attention_whole
from vision_harness import features_at, read
from transformers.models.qwen2_vl.modeling_qwen2_vl import (  # noqa: E402
    Qwen2VisionTransformerPretrainedModel,
    VisionAttention as QwenAttention,
)

PROMPT = "<|image_pad|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.visual and model.projector is vision.merger and vision.projector is model.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 128, 2, None)
    assert model.projector.projector_input_size == 64
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    attention = vision.layers[0].self_attn
    assert attention.o_proj is attention.proj and vision.layers[0].mlp.up_proj is vision.layers[0].mlp.fc1
    assert vision.layers[0].input_layernorm is vision.layers[0].norm1


def test_scores_and_pattern_are_per_image(model):
    support = model.vision.support()
    assert support["self_attn.attention_probabilities"] == {0: PER_IMAGE, 1: PER_IMAGE}
    assert support["self_attn.attention_scores"] == {0: PER_IMAGE, 1: PER_IMAGE}
    assert not support["self_attn.attention_queries"] and not support["self_attn.attention_head_outputs"]
    with pytest.raises(Unavailable, match="splits its queries"):
        with torch.no_grad(), model.trace(PROMPT, images=[image()]):
            model.vision.layers[0].self_attn.attention_probabilities.save()


def test_packed_values_and_the_merge(model):
    attention = ("attention_queries", "attention_keys", "attention_values", "attention_head_outputs", "attention_output")
    mask, patches, queries, keys, values, heads, contribution, merged_in, merged, tower, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings",
        *(f"vision.layers.1.self_attn.{name}" for name in attention),
        "projector.projector_input", "projector.projector_output", "vision.tower_output", "vision.image_features",
    )
    assert int(mask.sum()) == TOKENS and patches.shape == (1, PATCHES, 64)
    assert queries.shape == keys.shape == values.shape == (1, 4, PATCHES, 16) and heads.shape == (1, PATCHES, 4, 16)
    # the per-image head outputs, concatenated back, are what the output projection takes
    assert_attention_whole(model, 1, queries, keys, values, heads, contribution)
    # the merger takes the last block's stream as the tower holds it; Qwen2-VL scatters its output unchanged
    assert torch.equal(merged_in, tower[0]) and merged.shape == (TOKENS, 64) and torch.equal(merged, features)


def test_writes_land_on_the_packed_row(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        baseline = model.vision.layers[1].layer_output.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        model.vision.layers[0].self_attn.attention_queries[:, 0] = 0
        edited = model.vision.layers[1].layer_output.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        outputs = model.vision.layers[0].layer_output.detach().clone().save()
        model.vision.layers[0].layer_output = outputs * 2
        doubled = model.vision.layers[1].layer_input.detach().clone().save()
    assert (edited - baseline).abs().max() > 0
    # a written [1, patches, width] is squeezed back into the block's [patches, width]
    assert doubled.shape == (1, PATCHES, 64) and torch.equal(doubled, outputs * 2)


def test_head_outputs_hold_under_sdpa(tiny_model):
    model = tiny_model("qwen2_vl", attn_implementation="sdpa")
    attention = "vision.layers.0.self_attn"
    heads, contribution = read(model, PROMPT, f"{attention}.attention_head_outputs", f"{attention}.attention_output")
    projection = model.vision.layers[0].self_attn.o_proj._module
    assert torch.allclose(projection(heads.flatten(-2)), contribution, atol=1e-6)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeMerging = features_at(
    QwenVision, "/projector.ln_q.output", "the merger's norm: each merge block's first patch, normed, not merged",
    rows=lambda value: value.view(-1, 4 * value.shape[-1])[:, : value.shape[-1]],
)


class FeaturesAtTheCount(QwenVision):
    """image_features read where the wrapper counts them against the placeholders: equal, and causally inert."""

    image_features = QwenVision.image_features.at(
        "/model.source.self_get_placeholder_mask_0.inputs", select="image_features"
    )


class TestQwen2Vl(VisionFamilyTests):
    checkpoint = "qwen2_vl"
    no_image_values = ("vision.image_features", "vision.layers.0.self_attn.attention_queries")
    breaks = (
        ("vision_contribution", {QwenAttention: QwenWrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {Qwen2VisionTransformerPretrainedModel: FeaturesBeforeMerging}, "against image_features: off by"),
        ("written_image_values_move_downstream", {Qwen2VisionTransformerPretrainedModel: FeaturesAtTheCount}, "left the logits unchanged"),
    )
