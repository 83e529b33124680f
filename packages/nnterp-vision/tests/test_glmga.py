"""GLMGA: GLM-4.6V's class and modules under its own config type, served by the glm46v tables."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glmga
from nnterp_vision.testing import QwenWrongContribution
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention
from transformers.models.glm46v.modeling_glm46v import Glm46VForConditionalGeneration

PROMPT = "<|image|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("glmga")


def test_tree_and_sizes(model):
    assert model.family is glmga and type(model._module) is Glm46VForConditionalGeneration
    vision = model.vision
    assert isinstance(vision, Glm4vVision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Glm4vMerger) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 64)
    assert (model.num_layers, model.hidden_size) == (2, 64)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size


def test_the_processor_is_the_types_own(model):
    processor = model.processor
    assert type(processor.image_processor).__name__.startswith("GlmgaImageProcessor") and processor.image_processor.patch_expand_factor == 1


def test_merge_blocks_are_image_tokens(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        tower = model.vision.tower_output.detach().clone().save()
        merged = model.projector.projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
    assert int(mask.sum()) == TOKENS and tower.shape == (1, PATCHES, 32)
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)


def test_check_fails_on_a_broken_family(model):
    assert verdict("vision_contribution", model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(
        tiny_checkpoint("glmga"), family=with_envoys(glmga, {Glm4vVisionAttention: QwenWrongContribution}), attn_implementation="eager"
    )
    found = verdict("vision_contribution", broken, PROMPTS)
    assert found.status == "fail" and "against layer_output: off by" in found.detail, str(found)
