"""HyperCLOVA X Vision: the text model scales its whole input after the scatter, so image_features carry that factor."""

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.projector import FlatProjector
from nnterp_vision.components.qwen import PER_IMAGE, QwenVision
from nnterp_vision.families import hyperclovax_vision_v2
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image resized to 32 x 48: 4 x 6 patches, merged 2 x 2 into 6 image tokens
TOKENS = 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("hyperclovax_vision_v2")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))


def test_tree(model):
    assert isinstance(model.vision, QwenVision) and isinstance(model.projector, FlatProjector)
    assert model.vision is model.model.vision_model and model.projector is model.model.projector
    assert model.projector.projector_input_size == 64 and model.text_config.embedding_multiplier == 1.3


def test_features_are_the_projection_scaled_as_the_text_model_scales_its_input(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        merged = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    assert mask.sum() == TOKENS and merged.shape == (TOKENS, 64) and projected.shape == (TOKENS, 64)
    torch.testing.assert_close(features, projected * 1.3)
    assert torch.equal(stream[mask], features)


def test_a_written_feature_lands_as_written(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        model.vision.image_features = torch.ones_like(model.vision.image_features)
        stream = model.layers[0].layer_input.save()
    torch.testing.assert_close(stream[mask], torch.ones(TOKENS, 64))


def test_unscaled_features_fail_the_scatter_check(model):
    assert verdict("image_features_reach_the_text", model, PROMPTS).status == "pass"
    plain = with_envoys(hyperclovax_vision_v2, {Qwen2_5_VisionTransformerPretrainedModel: QwenVision})
    broken = StandardizedTransformer(tiny_checkpoint("hyperclovax_vision_v2"), family=plain, attn_implementation="eager")
    found = verdict("image_features_reach_the_text", broken, PROMPTS)
    assert found.status == "fail" and "against image_features: off by" in found.detail, str(found)
