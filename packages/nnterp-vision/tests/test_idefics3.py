"""Idefics3 and SmolVLM: an Idefics3 ViT, a pixel-shuffle connector, and the image features as the merge writes them in."""

import pytest
import torch
from nnterp import EProperty, StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components import ImageScatter, Vision, no_images
from nnterp_vision.components.idefics3 import MergerScatter
from nnterp_vision.families import idefics3, smolvlm
from nnterp_vision.layouts import ImageFeatures
from transformers.models.idefics3.modeling_idefics3 import Idefics3VisionTransformer
from transformers.models.smolvlm.modeling_smolvlm import SmolVLMVisionTransformer

PROMPT = "<image>Hello world"
FAMILIES = {"idefics3": (idefics3, Idefics3VisionTransformer, MergerScatter), "smolvlm": (smolvlm, SmolVLMVisionTransformer, ImageScatter)}
#: the tiny tower's 16 patches, pixel-shuffled by 2 into 4 image tokens
PATCHES, TOKENS = 16, 4


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def name(request):
    return request.param


@pytest.fixture(scope="module")
def model(tiny_model, name):
    torch.set_num_threads(1)
    return tiny_model(name)


def broken(name, envoys):
    """The family ``name`` with the module types of ``envoys`` keyed to other components."""
    family = with_envoys(FAMILIES[name][0], envoys, f"broken_{name}")
    return StandardizedTransformer(tiny_checkpoint(name), family=family, attn_implementation="eager")


def test_tree_and_sizes(model, name):
    tower, scatter = FAMILIES[name][1], FAMILIES[name][2]
    vision = model.vision
    assert isinstance(vision._module, tower) and vision is model.model.vision_model
    assert model.projector is vision.projector and model.projector is model.model.connector
    assert type(model.model) is scatter
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj
    # the connector takes the tower's width; its linear takes scale_factor ** 2 times that, after the shuffle
    assert (model.projector.projector_input_size, model.projector.scale_factor) == (64, 2)


def test_image_features_are_the_connector_output(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        taken = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    assert patches.shape == (1, PATCHES, 64) and mask.sum() == TOKENS
    # the connector takes the tower's last_hidden_state (post_layernorm on every patch) as it is
    assert torch.equal(tower, taken)
    assert projected.shape == (1, TOKENS, 64) and torch.equal(projected.flatten(0, 1), features)


class FeaturesScaled(Vision):
    """image_features read at the connector's linear and doubled: the right shape, the wrong tensor."""

    @EProperty("/projector.modality_projection.proj.output", "The connector's linear, doubled", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1) * 2


class FeaturesReturned(Vision):
    """image_features read at the copy the inner model returns after the text model ran: equal, and causally inert."""

    @EProperty("/model.output", "The features the inner model returns", no_images, select="image_hidden_states")
    def image_features(self, value) -> ImageFeatures:
        # Idefics3 returns the concatenated features; SmolVLM the tower's output, its pooler_output per image
        return value if isinstance(value, torch.Tensor) else torch.cat(value.pooler_output)


@pytest.mark.parametrize(
    ("check", "component", "message"),
    [
        ("image_features_reach_the_text", FeaturesScaled, "against image_features: off by"),
        ("written_image_values_move_downstream", FeaturesReturned, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, name, check, component, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    found = verdict(check, broken(name, {FAMILIES[name][1]: component}), PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
