"""EXAONE 4.5: Qwen2.5-VL's tower with grouped-query attention: keys and values have fewer heads, read whole before the per-image split."""

import torch
from nnterp import PostNormAttention
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.qwen import QwenMerger, QwenVision
from vision_harness import QwenWrongContribution, VisionFamilyTests
from transformers.models.exaone4_5.modeling_exaone4_5 import Exaone4_5_VisionAttention

PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image resized to 32 x 48: 4 x 6 patches, merged 2 x 2 into 6 image tokens
PATCHES, TOKENS = 24, 6


def test_tree(model):
    assert isinstance(model.vision, QwenVision) and isinstance(model.projector, QwenMerger)
    assert model.vision is model.model.visual and model.projector is model.vision.merger
    assert all(isinstance(layer.self_attn, PostNormAttention) for layer in model.layers)


def test_keys_and_values_have_fewer_heads(model):
    attention = model.vision.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
        heads = attention.attention_head_outputs.save()
    assert queries.shape == (1, 4, PATCHES, 16) and keys.shape == values.shape == (1, 2, PATCHES, 16)
    assert heads.shape == (1, PATCHES, 4, 16)


class TestExaone45(VisionFamilyTests):
    checkpoint = "exaone4_5"
    breaks = (
        ("vision_contribution", {Exaone4_5_VisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
