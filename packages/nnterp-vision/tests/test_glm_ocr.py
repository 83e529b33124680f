"""GLM-OCR: GLM-4.1V's tower (with q and k norms, no learned positions), merger and text model under GlmOcr* classes."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.glm_ocr import GlmOcrVision
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.families import glm_ocr
from nnterp_vision.testing import QwenWrongContribution
from transformers.models.glm_ocr.modeling_glm_ocr import GlmOcrVisionAttention, GlmOcrVisionModel

PROMPT = "<|image|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("glm_ocr")


def test_tree_and_sizes(model):
    vision = model.vision
    assert model.family is glm_ocr and isinstance(vision, GlmOcrVision) and vision is model.model.visual
    assert model.projector is vision.merger and isinstance(model.projector, Glm4vMerger)
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    # the blocks' MLP is intermediate_size wide (128), not out_hidden_size (64) as on GLM-4V
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 128)
    assert vision.layers[0].mlp.up_proj.out_features == 128
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size


def test_queries_and_keys_are_read_after_their_norms(model):
    attention = model.vision.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
    assert queries.shape == keys.shape == values.shape == (1, 2, PATCHES, 16)
    # the norms are per head: one weight of head_dim each
    norms = model.model.visual.blocks[0].attn
    assert norms.q_norm.weight.shape == norms.k_norm.weight.shape == (16,)


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
        tiny_checkpoint("glm_ocr"), family=with_envoys(glm_ocr, {GlmOcrVisionAttention: QwenWrongContribution}), attn_implementation="eager"
    )
    found = verdict("vision_contribution", broken, PROMPTS)
    assert found.status == "fail" and "against layer_output: off by" in found.detail, str(found)


def test_glm4v_tower_misreads_the_mlp_width(model):
    """Keyed to GLM-4V's tower component, the tower reports its MLP as out_hidden_size wide, not its real 128."""
    broken = StandardizedTransformer(
        tiny_checkpoint("glm_ocr"), family=with_envoys(glm_ocr, {GlmOcrVisionModel: Glm4vVision}), attn_implementation="eager"
    )
    assert broken.vision.intermediate_size == 64
