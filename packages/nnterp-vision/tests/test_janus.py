"""Janus (understanding): a SigLIP-layout tower whose every patch the aligner maps to one image token, between begin and end tokens."""

import torch
from nnterp_conformance.checks.vision import image
from nnterp_vision.components.janus import JanusVision
from nnterp_vision.families import janus
from nnterp_vision.testing import aligner_misread, assert_mixed_invoke_scatters, tower_breaks, VisionFamilyTests, read
from transformers.models.janus.modeling_janus import JanusVisionAttention, JanusVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, JanusVision) and vision is model.model.vision_model and model.projector is model.model.aligner
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    attention = vision.layers[0].self_attn
    assert attention.o_proj is attention.projection_layer and vision.layers[0].mlp.intermediate_size == 128
    assert model.projector.projector_input_size == 64
    # the generation path is there, unmapped
    assert type(model.model.vqmodel._module).__name__ == "JanusVQVAE"


def test_image_features_are_the_aligned_tower_output(model):
    mask, patches, tower, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # no class row, one image token per patch; the aligner takes the normed last stream whole
    assert patches.shape == (1, 16, 64) and tower.shape == (1, 16, 64) and mask.sum() == 16
    assert torch.equal(taken, tower)
    # fc1, then GELU and a linear per further depth; flattened into the scatter unchanged
    aligner = model.projector._module
    expected = aligner.hidden_layers[0](torch.nn.functional.gelu(aligner.fc1(tower)))
    torch.testing.assert_close(projected, expected)
    assert features.shape == (16, 64) and torch.equal(projected.flatten(0, 1), features)


def test_image_tokens_sit_between_begin_and_end(model):
    encoding = model.processor(text=PROMPT, images=[image()], return_tensors="pt")
    ids = encoding["input_ids"][0].tolist()
    tokenizer = model.processor.tokenizer
    begin, end = tokenizer.convert_tokens_to_ids("<begin_of_image>"), tokenizer.convert_tokens_to_ids("<end_of_image>")
    start = ids.index(begin)
    assert ids[start + 1 : start + 17] == [model.model._module.config.image_token_id] * 16 and ids[start + 17] == end


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    assert_mixed_invoke_scatters(model, 32)


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeActivation = aligner_misread(JanusVision, "fc1")


class TestJanus(VisionFamilyTests):
    checkpoint = "janus"
    family = janus.FAMILY
    breaks = tower_breaks(JanusVisionAttention, JanusVisionModel, FeaturesBeforeActivation, "against image_features: off by")
