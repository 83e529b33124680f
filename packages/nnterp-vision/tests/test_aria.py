"""Aria: Idefics3's tower, then learned queries pooling every image into a fixed count of image tokens, scattered unflattened."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_text.families.aria_text import AriaMoe
from nnterp_vision.components import Projector, Vision
from vision_harness import VisionFamilyTests, WrongContribution
from nnterp_vision.tiny.aria import QUERIES
from transformers.models.idefics3.modeling_idefics3 import Idefics3VisionAttention

PROMPT = "<|img|>Hello world"


def test_tree(model):
    assert type(model.vision) is Vision and type(model.projector) is Projector
    assert model.vision is model.model.vision_tower and model.projector is model.model.multi_modal_projector
    assert all(isinstance(layer.mlp, AriaMoe) for layer in model.layers)
    assert (model.vision.image_size, model.vision.patch_size, model.vision.num_layers) == (980, 70, 2)


def test_every_image_is_the_same_count_of_queries(model):
    with torch.no_grad(), model.trace("<|img|>Hello<|img|> world", images=[image(), image(1).resize((64, 24))]):
        mask = model.vision.image_token_mask.save()
        last = model.vision.layers[-1].layer_output.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    # the projector reads the last block's stream, before the tower's post_layernorm
    assert torch.equal(selected, last) and not torch.allclose(selected, tower)
    assert projected.shape == (2, QUERIES, 64) and mask.sum() == 2 * QUERIES
    assert torch.equal(projected.flatten(0, 1), features) and torch.equal(stream[mask], features)


class TestAria(VisionFamilyTests):
    checkpoint = "aria"
    breaks = (
        ("vision_contribution", {Idefics3VisionAttention: WrongContribution}, "against layer_output: off by"),
    )
