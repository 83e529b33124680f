"""Kimi-K2.5: a packed MoonViT (separate q, k, v; a final norm; a merge-kernel pool inside), an MLP projector, DeepSeek-V3 text."""

import pytest
import torch
from nnterp import SigmoidMoe, Unavailable
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.kimi_k25 import MoonVit, MoonVitAttention, MoonVitProjector
from nnterp_vision.components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from nnterp_vision.families import kimi_k25
from vision_harness import QwenWrongContribution, VisionFamilyTests, read
from transformers.models.kimi_k25.modeling_kimi_k25 import Kimi_K25VisionAttention

PROMPT = "<|media_pad|>Hello world"
#: the checks' 40 x 48 image (5 x 6 patches of 8) padded to 48 x 48: 6 x 6 patches, pooled 2 x 2 into 9 image tokens
SIDE, TOKENS = 6, 9


def test_tree_and_sizes(model):
    vision = model.vision
    assert model.family.name == kimi_k25.FAMILY.name and isinstance(vision, MoonVit) and vision is model.model.vision_tower
    assert isinstance(model.projector, MoonVitProjector) and model.projector is model.model.mm_projector
    block = vision.layers[0]
    assert isinstance(block, QwenVisionLayer) and isinstance(block.self_attn, MoonVitAttention) and isinstance(block.mlp, QwenVisionMlp)
    assert block.self_attn.o_proj is block.attn.proj and block.mlp.up_proj is block.mlp.fc1
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 64)
    assert (vision.patch_size, vision.spatial_merge_size, model.projector.projector_input_size) == (8, 2, 32)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # DeepSeek-V3's text model: every block's MLP a SigmoidMoe, block 0 dense
    assert all(isinstance(layer.mlp, SigmoidMoe) for layer in model.layers) and (model.num_layers, model.hidden_size) == (2, 64)


def test_queries_keys_and_values_are_the_transposes(model):
    attention = model.vision.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        queries = attention.attention_queries.save()
        values = attention.attention_values.save()
        heads = attention.attention_head_outputs.save()
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        normed = model.vision.layers[0].input_layernorm.output.save()
    assert queries.shape == values.shape == (1, 2, SIDE * SIDE, 16) and heads.shape == (1, SIDE * SIDE, 2, 16)
    # the values are v_proj's output, per head, not rotated
    with torch.no_grad():
        projected = attention._module.v_proj(normed)
    assert torch.equal(values, projected.view(1, SIDE * SIDE, 2, 16).transpose(1, 2))


def test_the_tower_pools_each_merge_kernel_into_one_token(model):
    mask, tower, pooled, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.tower_output", "projector.projector_input",
        "projector.projector_output", "vision.image_features",
    )
    assert int(mask.sum()) == TOKENS and tower.shape == (1, SIDE * SIDE, 32)
    # one frame: each token's row holds its 2 x 2 kernel's patches, raster order within and across kernels
    kernels = tower[0].view(SIDE // 2, 2, SIDE // 2, 2, 32).permute(0, 2, 1, 3, 4).reshape(TOKENS, 4, 32)
    assert pooled.shape == (TOKENS, 4, 32) and torch.equal(pooled, kernels)
    assert projected.shape == (TOKENS, 64) and torch.equal(projected, features)


class TestKimiK25(VisionFamilyTests):
    checkpoint = "kimi_k25"
    breaks = (
        ("vision_contribution", {Kimi_K25VisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        # MoonViT projects q, k and v apart: Qwen2-VL's names for them (one qkv split) do not exist in its forward
        ("vision_interior_feeds_the_output", {Kimi_K25VisionAttention: QwenVisionAttention}, ""),
    )
