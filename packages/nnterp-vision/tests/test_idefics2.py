"""Idefics2: Idefics3's tower and merge, its patches resampled by a perceiver to a fixed number of image tokens."""

import pytest
import torch
from nnsight.intervention.envoy import Envoy
from nnterp import EProperty, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks.vision import image
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import Vision, no_images
from nnterp_vision.components.idefics2 import PerceiverConnector
from nnterp_vision.components.idefics3 import MergerScatter
from nnterp_vision.families import idefics2
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.testing import PatternAtScores, WrongContribution
from transformers.models.idefics2.modeling_idefics2 import Idefics2VisionAttention, Idefics2VisionTransformer

PROMPT = "<image>Hello world"


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("idefics2")


def broken(envoys):
    """The Idefics2 family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("idefics2"), family=with_envoys(idefics2, envoys), attn_implementation="eager")


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.vision_model and model.projector is model.model.connector
    assert isinstance(model.projector, PerceiverConnector) and isinstance(model.model, MergerScatter)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (8, 32, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj
    assert model.projector.projector_input_size == 64 and model.projector.resampler_n_latents == 4
    # the resampler's blocks are not the text model's: plain envoys, and the text model keeps its two layers
    block = model.projector.perceiver_resampler.layers[0]
    assert type(block) is Envoy and type(block.self_attn) is Envoy and type(block.mlp) is Envoy and len(model.layers) == 2


def test_connector_resamples_tower_output_to_latents(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        tower = model.vision.tower_output.save()
        taken = model.projector.projector_input.save()
        projected = model.projector.modality_projection.output.save()
        resampled = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    # 16 patches in, projected to the text width row by row, resampled to 4 latents: 4 image tokens
    assert tower.shape == (1, 16, 64) and torch.equal(taken, tower) and projected.shape == (1, 16, 64)
    assert resampled.shape == (1, 4, 64) and mask.sum() == 4
    assert torch.equal(resampled.flatten(0, 1), features)


def test_image_tokens_sit_between_fake_tokens(model):
    ids = model.processor(text=PROMPT, images=[image()], return_tensors="pt")["input_ids"][0].tolist()
    fake, token = model.processor.tokenizer.convert_tokens_to_ids("<fake_token_around_image>"), model.processor.image_token_id
    start = ids.index(fake)
    assert ids[start + 1 : start + 5] == [token] * 4 and ids[start + 5] == fake and token == 301


def test_one_invoke_mixes_prompts_with_and_without_images(model):
    two, text = "<image>Hello<image> world", "The cat sat on the mat again"
    with torch.no_grad(), model.trace([two, text], images=[[image(1), image(2)], []]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    assert mask[0].sum() == 8 and not mask[1].any() and torch.equal(stream[mask], features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.projector.projector_output.save()


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeNorm(Vision):
    """image_features read at the resampler's last block, before its final norm: the right shape, the wrong tensor."""

    @EProperty("/projector.perceiver_resampler.layers.1.output", "The resampler's last block", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {Idefics2VisionAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {Idefics2VisionAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("image_features_reach_the_text", {Idefics2VisionTransformer: FeaturesBeforeNorm}, "against image_features: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
