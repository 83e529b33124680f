"""Llama 4: no inner model, so the root's own forward scatters the image features (ROOT_SCATTER); the text side is nnterp-text's Llama 4."""

import types

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_text.families.llama4_text import Llama4Moe
from nnterp_vision.components.llama4 import Llama4Vision
from nnterp_vision.components.projector import FlatProjector
from nnterp_vision.families import llama4
from nnterp_vision.testing import PatternAtScores, WrongContribution
from transformers.models.llama4.modeling_llama4 import Llama4VisionAttention

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image|>Hello world"
#: the checks' image resized to 32 x 32: 4 x 4 patches of 8 pixels and a class row; the pixel shuffle (0.5) makes 2 x 2 tokens
PATCHES, TOKENS = 16, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("llama4")


def variant(family):
    return StandardizedTransformer(tiny_checkpoint("llama4"), family=family, attn_implementation="eager")


def test_text_kit_passes_on_text_prompts(model):
    verdicts = run(model, PROMPTS, only=[name for name in CHECKS if name not in VISION_CHECKS])
    failed = [str(v) for v in verdicts if v.status not in ("pass", "skip")]
    assert not failed, "\n".join(failed)
    # the skips are the text family's: Llama 4's experts scale their inputs, so no per-slot weights or outputs
    skipped = {v.name for v in verdicts if v.status == "skip"}
    assert skipped == {"neurons_make_contribution", "zeroed_slot_leaves_the_sum", "rerouted_slot_runs_the_new_expert"}


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, Llama4Vision) and isinstance(model.projector, FlatProjector)
    assert vision is model.vision_model and model.projector is model.multi_modal_projector
    assert type(model._module).__name__ == "Llama4ForConditionalGeneration" and llama4.ROOT_SCATTER
    assert all(isinstance(layer.mlp, Llama4Moe) for layer in model.layers)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.pixel_shuffle_ratio) == (8, 32, 0.5)
    assert vision.layers[0].mlp.up_proj is vision.layers[0].mlp.fc1


def test_the_root_scatters_the_flat_projection(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        flat = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    # the class row is appended last; the adapter shuffles 16 patches into 4 tokens, flat over every image
    assert patches.shape == (1, PATCHES, 64) and tower.shape == (1, PATCHES + 1, 64)
    assert flat.shape == (TOKENS, 64) and mask.sum() == TOKENS
    assert torch.equal(projected, features) and torch.equal(stream[mask], features)


def test_pixels_follow_the_models_dtype(model):
    # Llama 4's image processor featurizes in bfloat16; the float32 tiny model receives float32 pixels
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        pixels = model.vision.inputs[0][0].save()
    assert model.processor(text=PROMPT, images=[image()], return_tensors="pt")["pixel_values"].dtype == torch.bfloat16
    assert pixels.dtype == torch.float32


def test_a_family_without_root_scatter_says_where_to_look():
    family = types.ModuleType("no_root_scatter")
    family.__dict__.update({key: value for key, value in vars(llama4).items() if not key.startswith("_") and key != "ROOT_SCATTER"})
    unscattered = variant(family)
    with pytest.raises(LookupError, match="declares no ROOT_SCATTER"):
        with torch.no_grad(), unscattered.trace(PROMPT, images=[image()]):
            unscattered.vision.image_features.save()


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {Llama4VisionAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {Llama4VisionAttention: PatternAtScores}, "against attention_probabilities: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    found = verdict(check, variant(with_envoys(llama4, envoys)), PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
