"""Cosmos 3: Qwen3-VL under NVIDIA's config type; the family is Qwen3-VL's with Cosmos3OmniModel as the scatter."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import ImageScatter
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, VisionFamilyTests, assert_tree
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

PROMPT = "<|image_pad|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_and_sizes(model):
    assert type(model._module).__name__ == "Cosmos3OmniForConditionalGeneration"
    assert isinstance(model.model, ImageScatter) and type(model.model._module).__name__ == "Cosmos3OmniModel"
    vision = model.vision
    assert_tree(model, Qwen3Vision, "model.visual", Qwen3Merger, "vision.merger")
    assert isinstance(vision.deepstack_merger_list[0], Qwen3Merger)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size) == (8, 128, 2)
    assert vision.deepstack_layers == (0,)
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.mlp.up_proj is layer.mlp.linear_fc1


def test_merger_output_is_scattered_and_deepstack_added_after_layer_zero(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        # in the order the forward computes them: DeepStack merger 0 runs after tower block 0, the main merger last
        mask = model.vision.image_token_mask.save()
        deep = model.vision.deepstack_merger_list[0].projector_output.save()
        merged = model.projector.projector_output.save()
        tower = model.vision.tower_output.save()
        features = model.vision.image_features.save()
        out0 = model.layers[0].layer_output.save()
        in1 = model.layers[1].layer_input.save()
    # 24 patches merged 2 x 2 into 6 image tokens; the scatter takes the main merger's output as it is
    assert int(mask.sum()) == TOKENS and tower.shape[-2:] == (PATCHES, 64)
    assert merged.shape == deep.shape == (TOKENS, 64) and torch.equal(merged, features)
    # DeepStack: merger 0's output is added to the stream at the image tokens after text layer 0
    torch.testing.assert_close(out0[mask] + deep, in1[mask])
    assert torch.equal(out0[~mask], in1[~mask])


class FeaturesAtDeepStack(Qwen3Vision):
    """image_features read at DeepStack merger 0's output: the main merger's shape, the wrong tensor."""

    image_features = Qwen3Vision.image_features.at("deepstack_merger_list.0.output", select=None)


class TestCosmos3Omni(VisionFamilyTests):
    checkpoint = "cosmos3_omni"
    breaks = (
        ("image_features_reach_the_text", {Qwen3VLVisionModel: FeaturesAtDeepStack}, "against image_features: off by"),
    )
