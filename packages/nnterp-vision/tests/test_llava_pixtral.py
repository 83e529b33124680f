"""LLaVA on a Pixtral tower: the llava family hands the checkpoint to llava_pixtral, whose packed tower keeps the identities."""

import types

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_conformance.variants import assert_breaks
from nnterp_vision.components.pixtral import PackedProjector, PixtralVision
from nnterp_vision.families import llava, llava_pixtral
from nnterp_vision.reasons import NO_IMAGE
from nnterp_vision.testing import PatternAtScores, WrongContribution, features_returned
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralVisionModel

PROMPT = "[IMG]Hello world"
#: the checks' 40 x 48 image is kept (its longest side is the tower's 48): 10 x 12 patches of 4 pixels, one image token
#: each (LLaVA merges none)
PATCHES = TOKENS = 120


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("llava_pixtral")


def family(name, rename, envoys):
    """A family module with LLaVA's task and ``rename`` / ``envoys``."""
    found = types.ModuleType(name)
    found.TASK, found.RENAME, found.ENVOYS = llava.TASK, rename, envoys
    return found


def broken(envoys):
    """The llava_pixtral family with the module types of ``envoys`` keyed to other components."""
    kept = {key: value for key, value in llava_pixtral.ENVOYS.items() if key not in envoys}
    return StandardizedTransformer(
        tiny_checkpoint("llava_pixtral"), family=family("broken_llava_pixtral", llava_pixtral.RENAME, {**envoys, **kept}),
        attn_implementation="eager",
    )


def test_llava_serves_the_pixtral_tower_through_for_config(model):
    assert model.family is llava_pixtral
    assert llava.for_config({"model_type": "llava", "vision_config": {"model_type": "pixtral"}}) is llava_pixtral
    # a CLIP tower (or a hub config.json naming none) stays with llava itself
    assert llava.for_config({"model_type": "llava", "vision_config": {"model_type": "clip_vision_model"}}) is None
    assert llava.for_config({"model_type": "llava"}) is None
    # an explicit family=llava is refined the same way
    assert StandardizedTransformer(tiny_checkpoint("llava_pixtral"), family=llava, attn_implementation="eager").family is llava_pixtral


def test_llava_names_do_not_fit_a_pixtral_tower():
    # why llava_pixtral exists: LLaVA's CLIP aliases (layer_norm1, out_proj, fc1 ...) resolve nowhere on Pixtral's modules
    clip = StandardizedTransformer(
        tiny_checkpoint("llava_pixtral"), family=family("llava_as_is", llava.RENAME, llava.ENVOYS), attn_implementation="eager"
    )
    found = verdict("standard_names_alias_native_envoys", clip, PROMPTS)
    assert found.status == "fail", str(found)


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, PixtralVision) and isinstance(model.projector, PackedProjector)
    assert vision is model.model.vision_tower and model.projector is vision.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, model.projector.projector_input_size) == (4, 128, 64)
    block = vision.layers[0]
    assert block.self_attn is block.attention and block.mlp is block.feed_forward
    assert block.input_layernorm is block.attention_norm and block.post_attention_layernorm is block.ffn_norm
    with pytest.raises(Unavailable, match="takes any resolution"):
        vision.image_size


def test_one_image_is_one_packed_row(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        tower = model.vision.tower_output.save()
        selected = model.projector.projector_input.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
    assert patches.shape == (1, PATCHES, 64) and tower.shape == (1, PATCHES, 64)
    assert mask.sum() == TOKENS and projected.shape == (1, TOKENS, 64)
    # the projector takes the last block's stream (vision_feature_layer -1, every patch: "full"), packed;
    # LlavaModel splits its rows per image and scatters them unchanged
    assert torch.equal(selected, tower) and torch.equal(projected[0], features)


def test_two_images_pack_under_a_block_diagonal_mask(model):
    small = image(1).resize((16, 24))  # 24 high, 16 wide: 6 x 4 patches, 24 image tokens
    with torch.no_grad(), model.trace("[IMG]Hello[IMG] world", images=[image(), small]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        pattern = model.vision.layers[0].self_attn.attention_probabilities.save()
        projected = model.projector.projector_output.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
    assert patches.shape == (1, PATCHES + 24, 64) and pattern.shape == (1, 4, PATCHES + 24, PATCHES + 24)
    # no patch attends to the other image's
    assert pattern[..., :PATCHES, PATCHES:].abs().max() == 0 and pattern[..., PATCHES:, :PATCHES].abs().max() == 0
    assert mask.sum() == TOKENS + 24 and torch.equal(projected[0], features) and torch.equal(stream[mask], features)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.patch_embeddings.save()
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.projector.projector_output.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()
    assert text.shape[-1] == 64
    assert NO_IMAGE.startswith("this trace passes no image")


# -- each check fails on a family that breaks what it checks ----------------------------------------


FeaturesReturned = features_returned(PixtralVision)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {PixtralAttention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {PixtralAttention: PatternAtScores}, "against attention_probabilities: off by"),
        ("written_image_values_move_downstream", {PixtralVisionModel: FeaturesReturned}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
