"""Aria: Idefics3's tower, then learned queries pooling every image into a fixed count of image tokens, scattered unflattened."""

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import with_envoys
from nnterp_text.families.aria_text import AriaMoe
from nnterp_vision.components import Projector, Vision
from nnterp_vision.families import aria
from nnterp_vision.testing import WrongContribution
from nnterp_vision.tiny.aria import QUERIES
from transformers.models.idefics3.modeling_idefics3 import Idefics3VisionAttention

PROMPT = "<|img|>Hello world"


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("aria")


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


def test_check_fails_on_a_broken_family(model):
    assert verdict("vision_contribution", model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(
        tiny_checkpoint("aria"), family=with_envoys(aria, {Idefics3VisionAttention: WrongContribution}), attn_implementation="eager"
    )
    found = verdict("vision_contribution", broken, PROMPTS)
    assert found.status == "fail" and "against layer_output: off by" in found.detail, str(found)
