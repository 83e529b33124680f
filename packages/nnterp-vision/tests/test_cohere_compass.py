"""Cohere Compass: Qwen3-VL's layout over a Cohere text model whose logits the wrapper scales by logit_scale."""

import torch
from nnterp import ParallelLayer, StandardizedTransformer
from nnterp.logits import unembed
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import PROMPTS
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from nnterp_vision.families import cohere_compass
from vision_harness import QwenWrongContribution, VisionFamilyTests, read
from transformers.models.cohere_compass.modeling_cohere_compass import CohereCompassVisionAttention

PROMPT = "<|IMAGE_PAD|>Hello world"


def test_tree(model):
    assert isinstance(model.vision, Qwen3Vision) and isinstance(model.projector, Qwen3Merger)
    assert model.vision.deepstack_layers == (0,) and isinstance(model.vision.deepstack_mergers[0], Qwen3Merger)
    assert all(isinstance(layer, ParallelLayer) for layer in model.layers)


def test_the_deepstack_merger_is_added_after_layer_zero(model):
    mask, deep, out0, in1 = read(
        model, PROMPT, "vision.image_token_mask", "vision.deepstack_mergers.0.projector_output", "layers.0.layer_output",
        "layers.1.layer_input",
    )
    torch.testing.assert_close(in1[mask], out0[mask] + deep)
    assert torch.equal(in1[~mask], out0[~mask])


def test_logits_without_the_scale_fail_the_logits_check(model):
    assert model.text_config.logit_scale == 0.5
    assert verdict("logits_from_last_layer", model, PROMPTS).status == "pass"
    # the text family's scaled logits not taken: the plain projection
    unscaled = cohere_compass.FAMILY.replace(name="unscaled_compass", project_on_vocab=unembed)
    found = verdict("logits_from_last_layer", StandardizedTransformer(tiny_checkpoint("cohere_compass"), family=unscaled), PROMPTS)
    assert found.status == "fail", str(found)


class TestCohereCompass(VisionFamilyTests):
    checkpoint = "cohere_compass"
    breaks = (
        ("vision_contribution", {CohereCompassVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
