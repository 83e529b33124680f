"""PaliGemma: a SigLIP tower and a linear projector, the image and prompt one prefix the text model attends to both ways."""

import torch
from nnterp_vision.components.siglip import SiglipVision
from vision_harness import VisionFamilyTests, WrongContribution, assert_tiny_vit, features_at, read
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

PROMPT = "<image>Hello world"


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert isinstance(vision, SiglipVision)
    assert_tiny_vit(vision)
    assert model.projector.projector_input_size == 64
    assert SiglipVision.image_features.dims == ("image_tokens", "hidden_size")


def test_image_features_are_the_projection_of_tower_output(model):
    mask, patches, tower, taken, projected, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    # no class row, one image token per patch; the projector takes the normed last stream whole
    assert patches.shape == (1, 16, 64) and tower.shape == (1, 16, 64) and mask.sum() == 16
    assert torch.equal(taken, tower)
    # PaliGemma scatters the projection [images, patches, hidden] as it is: image_features is it flattened
    assert features.shape == (16, 64) and torch.equal(projected.flatten(0, 1), features)


def test_image_and_prompt_attend_both_ways(model):
    mask, pattern = read(model, PROMPT, "vision.image_token_mask", "layers.0.self_attn.attention_probabilities")
    # the processor's token_type_ids are zero over image, BOS, prompt and newline: one bidirectional prefix
    first = int(mask[0].nonzero()[0])
    assert pattern[0, :, first, -1].abs().min() > 0  # the first image token sees the last prompt token
    with torch.no_grad(), model.trace("Hello world"):
        causal = model.layers[0].self_attn.attention_probabilities.save()
    assert torch.equal(causal[0].triu(1), torch.zeros_like(causal[0]))  # text alone is causal


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesBeforeProjection = features_at(
    SiglipVision, "/projector.linear.input", "the projector's input, before its linear layer: the right shape, the wrong tensor",
)


class TestPaligemma(VisionFamilyTests):
    checkpoint = "paligemma"
    breaks = (
        ("vision_contribution", {SiglipAttention: WrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {SiglipVisionModel: FeaturesBeforeProjection}, "against image_features: off by"),
    )
