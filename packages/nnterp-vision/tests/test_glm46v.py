"""GLM-4.6V: GLM-4.1V's tower under Glm46VModel, on GLM-4.1V's text model (the default) or GLM-4.5V's mixture (``glm46v_moe``)."""

import pytest
import torch
from nnterp import Moe, Unavailable
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glm46v, glm46v_moe
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests, read
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention
from transformers.models.glm4v_moe.modeling_glm4v_moe import Glm4vMoeVisionAttention

PROMPT = "<|image|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS
#: each checkpoint, the family that serves it, and its tower's attention type
CHECKPOINTS = {"glm46v": (glm46v.FAMILY, Glm4vVisionAttention), "glm46v_moe": (glm46v_moe.FAMILY, Glm4vMoeVisionAttention)}


def name(model):
    return "glm46v_moe" if model.family is glm46v_moe.FAMILY else "glm46v"


def test_the_config_names_the_family_and_the_tree(model):
    family, attention = CHECKPOINTS[name(model)]
    assert model.family is family and type(model.vision.layers[0].self_attn._module) is attention
    vision = model.vision
    assert isinstance(vision, Glm4vVision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Glm4vMerger) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 64)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # GLM-4.1V's text model has dense blocks; GLM-4.5V's a dense block 0, then a mixture with a shared expert
    mixture = model.layers[1].mlp
    assert isinstance(mixture, Moe) == (family is glm46v_moe.FAMILY)
    if family is glm46v_moe.FAMILY:
        assert (mixture.num_experts, mixture.top_k) == (4, 2) and mixture.router is mixture.gate


def test_final_norm_and_merger_feed_the_scatter(model):
    mask, last, tower, merged_in, merged, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.layers.-1.layer_output", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    visual = model.model.visual
    assert int(mask.sum()) == TOKENS and tower.shape == (1, PATCHES, 32) and torch.equal(tower, visual.post_layernorm(last))
    blocks = tower[0].view(-1, 2, 2, 32).permute(0, 3, 1, 2)
    assert torch.allclose(visual.downsample(blocks).view(-1, 64), merged_in, atol=1e-6)
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)


class TestGlm46v(VisionFamilyTests):
    checkpoint = "glm46v"
    breaks = (
        ("vision_contribution", {Glm4vVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )


class TestGlm46vMoe(VisionFamilyTests):
    checkpoint = "glm46v_moe"
    breaks = (
        ("vision_contribution", {Glm4vMoeVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
