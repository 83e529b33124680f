"""Cohere Compass: Qwen3-VL's layout over a Cohere text model whose logits the wrapper scales by logit_scale."""

import types

import pytest
import torch
from nnterp import ParallelLayer, StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_vision.components.qwen import PER_IMAGE
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from nnterp_vision.families import cohere_compass

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|IMAGE_PAD|>Hello world"


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("cohere_compass")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))


def test_tree(model):
    assert isinstance(model.vision, Qwen3Vision) and isinstance(model.projector, Qwen3Merger)
    assert model.vision.deepstack_layers == (0,) and isinstance(model.vision.deepstack_mergers[0], Qwen3Merger)
    assert all(isinstance(layer, ParallelLayer) for layer in model.layers)


def test_the_deepstack_merger_is_added_after_layer_zero(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        deep = model.vision.deepstack_mergers[0].projector_output.save()
        out0 = model.layers[0].layer_output.save()
        in1 = model.layers[1].layer_input.save()
    torch.testing.assert_close(in1[mask], out0[mask] + deep)
    assert torch.equal(in1[~mask], out0[~mask])


def test_logits_without_the_scale_fail_the_logits_check(model):
    assert model.text_config.logit_scale == 0.5
    assert verdict("logits_from_last_layer", model, PROMPTS).status == "pass"
    unscaled = types.ModuleType("unscaled_compass")
    unscaled.__dict__.update({k: v for k, v in vars(cohere_compass).items() if not k.startswith("_") and k != "project_on_vocab"})
    found = verdict("logits_from_last_layer", StandardizedTransformer(tiny_checkpoint("cohere_compass"), family=unscaled), PROMPTS)
    assert found.status == "fail", str(found)
