"""Qwen2.5-VL: the windowed Qwen ViT keeps the block identities in window order, and the tower's re-ordered merge is what the text model receives."""

import pytest
import torch


from nnterp import Unavailable  # noqa: E402
from nnterp_conformance.checks.vision import image  # noqa: E402
from nnterp_vision.components.qwen import PER_IMAGE  # noqa: E402
from vision_harness import QwenWrongContribution, VisionFamilyTests
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLVisionAttention  # noqa: E402
from transformers.vision_utils import get_vision_window_index  # noqa: E402

PROMPT = "<|image_pad|>Hello world"
#: the checks' image as a 4 x 6 grid of patches: 2 x 3 merge blocks, in two 32-pixel windows (2 x 2 and 2 x 1 blocks)
GRID, PATCHES, TOKENS = (1, 4, 6), 24, 6


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.visual and model.projector is vision.merger
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 128, 2, 32)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.proj
    assert model.vision.support()["self_attn.attention_probabilities"] == {0: PER_IMAGE, 1: PER_IMAGE}


def test_window_order_and_the_restored_merge(model):
    values = []
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        for read in (
            lambda: model.vision.patch_embeddings, lambda: model.vision.layers[0].layer_input,
            lambda: model.vision.layers[0].self_attn.attention_head_outputs, lambda: model.vision.layers[0].self_attn.attention_output,
            lambda: model.projector.projector_input, lambda: model.projector.projector_output,
            lambda: model.vision.tower_output, lambda: model.vision.image_features,
        ):
            values.append(read().detach().clone())
    patches, stream, heads, contribution, merged_in, merged, tower, features = values
    window, _ = get_vision_window_index(torch.tensor([GRID]), spatial_merge_size=2, window_size=32, patch_size=8)
    assert not torch.equal(window, torch.arange(TOKENS))  # two windows: the order differs
    # the blocks run in window order: block 0's input is the patch embeddings permuted merge block by merge block
    blocks = patches[0].view(TOKENS, 4, 64)
    assert torch.equal(stream[0], blocks[window].flatten(0, 1))
    projection = model.vision.layers[0].self_attn.o_proj._module
    assert torch.allclose(projection(heads.flatten(-2)), contribution, atol=1e-6)
    # the merger runs on the window order; the tower restores the merge-block order the tokens are in
    assert torch.equal(merged_in, tower[0]) and torch.equal(merged[torch.argsort(window)], features)


class TestQwen25Vl(VisionFamilyTests):
    checkpoint = "qwen2_5_vl"
    breaks = (
        ("vision_contribution", {Qwen2_5_VLVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
