"""DeepSeek-VL and Janus (understanding): a SigLIP-layout tower whose every patch an MLP aligner projects to one image
token; Janus sets the image tokens between begin and end tokens and carries an unmapped generation path."""

import pytest
import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components import Vision
from nnterp_vision.components.janus import JanusVision
from nnterp_vision.families import janus
from vision_harness import VisionFamilyTests, aligner_misread, assert_mixed_invoke_scatters, assert_tiny_vit
from vision_harness import read, tower_breaks
from transformers.models.janus.modeling_janus import JanusVisionAttention, JanusVisionModel
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

PROMPT = "<image>Hello world"
#: one image token per patch of the tower's 4 x 4 grid
TOKENS = 16


def is_janus(model):
    return model.family is janus.FAMILY


def aligned(model, tower):
    """The aligner's output recomputed from its input: a linear layer, GELU, a linear layer, row by row."""
    aligner = model.projector._module
    first, second = (aligner.fc1, aligner.hidden_layers[0]) if is_janus(model) else (aligner.linear1, aligner.linear2)
    return second(torch.nn.functional.gelu(first(tower)))


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_model and model.projector is model.model.aligner
    assert model.projector.projector_input_size == 64
    if is_janus(model):
        assert isinstance(vision, JanusVision)
        assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
        assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
        attention = vision.layers[0].self_attn
        assert attention.o_proj is attention.projection_layer and vision.layers[0].mlp.intermediate_size == 128
        # the generation path is there, unmapped
        assert type(model.model.vqmodel._module).__name__ == "JanusVQVAE"
    else:
        assert model.projector is vision.projector
        assert_tiny_vit(vision)
        assert vision.layers[0].mlp.up_proj is vision.layers[0].mlp.fc1
        assert model.processor.image_token == "<image>" and model.processor.num_image_tokens == TOKENS


def test_image_features_are_the_aligned_tower_output(model):
    mask, patches, tower, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # no class row, one image token per patch; the aligner takes the normed last stream whole
    assert patches.shape == (1, TOKENS, 64) and tower.shape == (1, TOKENS, 64) and mask.sum() == TOKENS
    assert torch.equal(taken, tower)
    torch.testing.assert_close(projected, aligned(model, tower))
    # the wrapper flattens the rows into the scatter unchanged
    assert features.shape == (TOKENS, 64) and torch.equal(projected.flatten(0, 1), features)


def test_image_tokens_sit_between_begin_and_end(model):
    if not is_janus(model):
        pytest.skip("DeepSeek-VL's processor adds no begin and end tokens")
    encoding = model.processor(text=PROMPT, images=[image()], return_tensors="pt")
    ids = encoding["input_ids"][0].tolist()
    tokenizer = model.processor.tokenizer
    begin, end = tokenizer.convert_tokens_to_ids("<begin_of_image>"), tokenizer.convert_tokens_to_ids("<end_of_image>")
    start = ids.index(begin)
    image_token = model.model._module.config.image_token_id
    assert ids[start + 1 : start + 1 + TOKENS] == [image_token] * TOKENS and ids[start + 1 + TOKENS] == end


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    assert_mixed_invoke_scatters(model, 2 * TOKENS)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class TestDeepseekVl(VisionFamilyTests):
    checkpoint = "deepseek_vl"
    breaks = tower_breaks(SiglipAttention, SiglipVisionModel, aligner_misread(Vision, "linear1"), "against image_features: off by")


class TestJanus(VisionFamilyTests):
    checkpoint = "janus"
    breaks = tower_breaks(JanusVisionAttention, JanusVisionModel, aligner_misread(JanusVision, "fc1"), "against image_features: off by")
