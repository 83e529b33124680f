"""Qianfan-OCR: InternVL's layer-scaled InternViT, pixel shuffle and projector under its own classes, on a Qwen3 text model."""

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components import VisionMlp
from nnterp_vision.components.internvl import InternVision, LayerScaledAttention, LayerScaledMlp
from nnterp_vision.families import qianfan_ocr
from nnterp_vision.testing import WrongContribution
from transformers.models.qianfan_ocr.modeling_qianfan_ocr import QianfanOCRVisionAttention, QianfanOCRVisionMLP

PROMPT = "<image>Hello world"  # the placeholder the processor expands into <IMG_CONTEXT> tokens
#: the checks' 40 x 48 image: 2 x 2 tiles of 16 x 16 and the thumbnail, each 4 x 4 patches (and a class row) shuffled into 4 tokens
CROPS, PATCHES, TOKENS_PER_CROP = 5, 16, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("qianfan_ocr")


def broken(envoys):
    """The Qianfan-OCR family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("qianfan_ocr"), family=with_envoys(qianfan_ocr, envoys), attn_implementation="eager")


def test_tree_and_sizes(model):
    vision = model.vision
    assert model.family is qianfan_ocr and model.config.text_config.model_type == "qwen3"
    assert isinstance(vision, InternVision) and vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (4, 16, 128)
    assert model.projector.projector_input_size == 4 * 64
    block = vision.layers[0]
    assert isinstance(block.self_attn, LayerScaledAttention) and isinstance(block.mlp, LayerScaledMlp)
    assert block.self_attn.o_proj is block.self_attn.projection_layer and block.mlp.up_proj is block.mlp.fc1


def test_prompts_hold_the_placeholder_the_processor_expands(model):
    assert (model.processor.image_placeholder_token, model.processor.image_token) == ("<image>", "<IMG_CONTEXT>")
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
    assert mask.sum() > 0


def test_contributions_are_the_layer_scaled_outputs(model):
    block = model.vision.layers[0]
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        attention = block.self_attn.output[0].save()
        contribution = block.self_attn.attention_output.save()
        mlp = block.mlp.output.save()
        mlp_contribution = block.mlp.mlp_output.save()
    assert torch.equal(contribution, attention * block._module.lambda_1)
    assert torch.equal(mlp_contribution, mlp * block._module.lambda_2)


def test_the_class_row_is_dropped_and_the_crops_shuffled_into_tokens(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    assert tower.shape == (CROPS, 1 + PATCHES, 64) and selected.shape == (CROPS, TOKENS_PER_CROP, 4 * 64)
    assert int(mask.sum()) == CROPS * TOKENS_PER_CROP and torch.equal(projected.flatten(0, 1), features)


def test_the_mlp_contribution_check_fails_unscaled(model):
    assert verdict("vision_contribution", model, PROMPTS).status == "pass"
    found = verdict("vision_contribution", broken({QianfanOCRVisionMLP: VisionMlp}), PROMPTS)
    assert found.status == "fail", str(found)


def test_the_attention_contribution_check_fails_read_wrong(model):
    found = verdict("vision_contribution", broken({QianfanOCRVisionAttention: WrongContribution}), PROMPTS)
    assert found.status == "fail", str(found)
