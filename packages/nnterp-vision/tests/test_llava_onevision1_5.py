"""LLaVA-OneVision-1.5: EXAONE 4.5's wrapper over Qwen3, its Qwen ViT prepending a class row to each image's patches.

The blocks run on every patch and each image's class row; the tower drops the
class rows after its last block, so the merger takes (and ``tower_output`` is)
one row per patch. A projector said to read the last block's stream as it is
(class row kept) is caught by ``projector_reads_the_selected_stream``.
"""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.projector import Selected
from nnterp_vision.components.qwen import QwenVision
from nnterp_vision.components.qwen3 import Qwen3Merger
from vision_harness import QwenWrongContribution, VisionFamilyTests
from transformers.models.llava_onevision1_5.modeling_llava_onevision1_5 import (
    LlavaOnevision15VisionAttention,
    LlavaOnevision15VisionPatchMerger,
)

PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image resized to 32 x 48: 4 x 6 patches, merged 2 x 2 into 6 image tokens
PATCHES, TOKENS = 24, 6


class ClassRowKept(Qwen3Merger):
    """The merger said to take the last block's stream as the blocks hold it, the image's class row still first."""

    def selection(self):
        return (Selected(f"layers.{self.root.vision.num_layers - 1}.layer_output"),)


def test_tree(model):
    assert isinstance(model.vision, QwenVision) and isinstance(model.projector, Qwen3Merger)
    assert model.vision is model.model.visual and model.projector is model.vision.merger
    assert model._module.config.text_config.model_type == "qwen3"


def test_the_blocks_carry_a_class_row_the_merger_does_not_take(model):
    vision = model.vision
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        patches = vision.patch_embeddings.save()
        first = vision.layers[0].layer_input.save()
        last = vision.layers[-1].layer_output.save()
        taken = model.projector.projector_input.save()
        features = model.projector.projector_output.save()
        tower = vision.tower_output.save()
    assert patches.shape == (1, PATCHES, 64)
    assert first.shape == last.shape == (1, PATCHES + 1, 64)
    torch.testing.assert_close(taken, last[0, 1:], rtol=0, atol=0)
    torch.testing.assert_close(tower, taken.unsqueeze(0), rtol=0, atol=0)
    assert features.shape == (TOKENS, 64)


class TestLlavaOnevision15(VisionFamilyTests):
    checkpoint = "llava_onevision1_5"
    breaks = (
        ("vision_contribution", {LlavaOnevision15VisionAttention: QwenWrongContribution}, "against layer_output: off by"),
        ("projector_reads_the_selected_stream", {LlavaOnevision15VisionPatchMerger: ClassRowKept}, "shapes differ"),
    )
