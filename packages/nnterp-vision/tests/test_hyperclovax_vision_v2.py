"""HyperCLOVA X Vision: the text model scales its whole input after the scatter, so image_features carry that factor."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.projector import FlatProjector
from nnterp_vision.components.qwen import QwenVision
from vision_harness import VisionFamilyTests, read
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image resized to 32 x 48: 4 x 6 patches, merged 2 x 2 into 6 image tokens
TOKENS = 6


def test_tree(model):
    assert isinstance(model.vision, QwenVision) and isinstance(model.projector, FlatProjector)
    assert model.vision is model.model.vision_model and model.projector is model.model.projector
    assert model.projector.projector_input_size == 64 and model.text_config.embedding_multiplier == 1.3


def test_features_are_the_projection_scaled_as_the_text_model_scales_its_input(model):
    mask, merged, projected, features, stream = read(
        model, PROMPT, "vision.image_token_mask", "projector.projector_input", "projector.projector_output",
        "vision.image_features", "layers.0.layer_input",
    )
    assert mask.sum() == TOKENS and merged.shape == (TOKENS, 64) and projected.shape == (TOKENS, 64)
    torch.testing.assert_close(features, projected * 1.3)
    assert torch.equal(stream[mask], features)


def test_a_written_feature_lands_as_written(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        model.vision.image_features = torch.ones_like(model.vision.image_features)
        stream = model.layers[0].layer_input.save()
    torch.testing.assert_close(stream[mask], torch.ones(TOKENS, 64))


class TestHyperclovaxVisionV2(VisionFamilyTests):
    checkpoint = "hyperclovax_vision_v2"
    breaks = (
        # the tower's features unscaled: what the projector returns, not what the text model receives
        ("image_features_reach_the_text", {Qwen2_5_VisionTransformerPretrainedModel: QwenVision}, "against image_features: off by"),
    )
