"""PaliGemma: a SigLIP tower and a linear projector, the image and prompt one prefix the text model attends to both ways."""

import pytest
import torch
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import no_images
from nnterp_vision.components.siglip import SiglipVision
from nnterp_vision.families import paligemma
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.testing import WrongContribution
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<image>Hello world"


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("paligemma")


def broken(envoys):
    """The PaliGemma family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("paligemma"), family=with_envoys(paligemma, envoys), attn_implementation="eager")


def test_text_kit_passes_on_text_prompts(model):
    # the PaliGemma processor refuses text without an image: prepare_invoke sends it to the tokenizer
    verdicts = run(model, PROMPTS, only=[name for name in CHECKS if name not in VISION_CHECKS])
    failed = [str(v) for v in verdicts if v.status != "pass"]
    assert not failed, "\n".join(failed)
    assert len(verdicts) >= 15


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert isinstance(vision, SiglipVision)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj
    assert model.projector.projector_input_size == 64
    assert SiglipVision.image_features.dims == ("image_tokens", "hidden_size")


def test_image_features_are_the_projection_of_tower_output(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        taken = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # no class row, one image token per patch; the projector takes the normed last stream whole
    assert patches.shape == (1, 16, 64) and tower.shape == (1, 16, 64) and mask.sum() == 16
    assert torch.equal(taken, tower)
    # PaliGemma scatters the projection [images, patches, hidden] as it is: image_features is it flattened
    assert features.shape == (16, 64) and torch.equal(projected.flatten(0, 1), features)


def test_image_and_prompt_attend_both_ways(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        pattern = model.layers[0].self_attn.attention_probabilities.save()
    # the processor's token_type_ids are zero over image, BOS, prompt and newline: one bidirectional prefix
    first = int(mask[0].nonzero()[0])
    assert pattern[0, :, first, -1].abs().min() > 0  # the first image token sees the last prompt token
    with torch.no_grad(), model.trace("Hello world"):
        causal = model.layers[0].self_attn.attention_probabilities.save()
    assert torch.equal(causal[0].triu(1), torch.zeros_like(causal[0]))  # text alone is causal


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeProjection(SiglipVision):
    """image_features read at the projector's input, before its linear layer: the right shape, the wrong tensor."""

    @EProperty("/projector.linear.input", "The projector's input", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {SiglipAttention: WrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {SiglipVisionModel: FeaturesBeforeProjection}, "against image_features: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
