"""Llama 4: no inner model, so the root's own forward scatters the image features (``root_scatter``); the text side is nnterp-text's Llama 4."""

import pytest
import torch
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import load
from nnterp_text.families.llama4_text import Llama4Moe
from nnterp_vision.components.llama4 import Llama4Vision
from nnterp_vision.components.projector import AdaptedProjector
from nnterp_vision.families import llama4
from vision_harness import PatternAtScores, VisionFamilyTests, WrongContribution, read
from transformers.models.llama4.modeling_llama4 import Llama4VisionAttention

PROMPT = "<|image|>Hello world"
#: the checks' image resized to 32 x 32: 4 x 4 patches of 8 pixels and a class row; the pixel shuffle (0.5) makes 2 x 2 tokens
PATCHES, TOKENS = 16, 4


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, Llama4Vision) and isinstance(model.projector, AdaptedProjector)
    assert vision is model.vision_model and model.projector is model.multi_modal_projector
    assert type(model._module).__name__ == "Llama4ForConditionalGeneration" and llama4.FAMILY.root_scatter
    assert all(isinstance(layer.mlp, Llama4Moe) for layer in model.layers)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.pixel_shuffle_ratio) == (8, 32, 0.5)
    assert vision.layers[0].mlp.up_proj is vision.layers[0].mlp.fc1


def test_the_root_scatters_the_flattened_projection(model):
    mask, patches, tower, adapted, projected, features, stream = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features", "layers.0.layer_input",
    )
    # the class row is appended last; the adapter shuffles 16 patches into 4 tokens per image, which the projector
    # takes per image and the wrapper flattens before the scatter
    assert patches.shape == (1, PATCHES, 64) and tower.shape == (1, PATCHES + 1, 64)
    assert adapted.shape == (1, TOKENS, 64) and mask.sum() == TOKENS
    assert torch.equal(projected.flatten(0, 1), features) and torch.equal(stream[mask], features)


def test_pixels_follow_the_models_dtype(model):
    # Llama 4's image processor featurizes in bfloat16; the float32 tiny model receives float32 pixels
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        pixels = model.vision.inputs[0][0].save()
    assert model.processor(text=PROMPT, images=[image()], return_tensors="pt")["pixel_values"].dtype == torch.bfloat16
    assert pixels.dtype == torch.float32


def test_a_family_without_root_scatter_says_where_to_look():
    unscattered = load("llama4", family=llama4.FAMILY.replace(name="no_root_scatter", root_scatter=None))
    with pytest.raises(LookupError, match="declares no root_scatter"):
        with torch.no_grad(), unscattered.trace(PROMPT, images=[image()]):
            unscattered.vision.image_features.save()


class TestLlama4(VisionFamilyTests):
    checkpoint = "llama4"
    breaks = (
        ("vision_contribution", {Llama4VisionAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {Llama4VisionAttention: PatternAtScores}, "against attention_probabilities: off by"),
    )
