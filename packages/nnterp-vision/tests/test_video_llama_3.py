"""VideoLLaMA3: the packed SigLIP-named tower keeps the blocks' identities, its final norm is tower_output, and the projector's rows are what the text model receives."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.qwen import PER_IMAGE, QwenVisionAttention
from nnterp_vision.components.video_llama_3 import VideoLlama3Projector, VideoLlama3Vision
from nnterp_vision.families import video_llama_3
from transformers.models.video_llama_3.modeling_video_llama_3 import VideoLlama3VisionAttention, VideoLlama3VisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image, kept 40 x 48: a 5 x 6 grid of 8-pixel patches, one image token each (images merge by 1)
PATCHES = TOKENS = 30


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("video_llama_3")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))


@pytest.mark.parametrize("seed", [0, 3, 11, 12])
def test_vision_checks_pass_on_drawn_batches(model, seed):
    case = Case(("The cat sat", "Hello world again"), seed=seed)
    verdicts = [verdict(name, model, case) for name in VISION_CHECKS if name != "vision_pattern_is_softmax_of_scores"]
    failed = [str(v) for v in verdicts if v.status != "pass"]
    assert not failed, "\n".join(failed)


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, VideoLlama3Vision) and vision is model.model.vision_model and model.projector is model.model.projector
    assert isinstance(model.projector, VideoLlama3Projector) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert vision.layers is vision.encoder.layers and vision.patch_embed is vision.embeddings.patch_embedding
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, model.projector.projector_input_size) == (8, 64, 32)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    with pytest.raises(Unavailable, match="image_merge_sizes"):
        vision.spatial_merge_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.out_proj and layer.mlp.down_proj is layer.mlp.fc2


def test_final_norm_resample_and_projector(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.detach().clone().save()
        last = model.vision.layers[-1].layer_output.detach().clone().save()
        tower = model.vision.tower_output.detach().clone().save()
        merged_in = model.projector.projector_input.detach().clone().save()
        merged = model.projector.projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
    assert int(mask.sum()) == TOKENS and patches.shape == tower.shape == (1, PATCHES, 32)
    # tower_output is the final norm of the last block's stream
    assert torch.equal(tower, model.model.vision_model.post_layernorm(last))
    # at an image's merge size of 1 the resampling keeps every row: the projector takes tower_output, row by row
    assert torch.allclose(merged_in, tower[0], atol=1e-6)
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)
    assert VideoLlama3Projector.projector_input.dims == ("image_tokens", "projector_input_size")
    assert VideoLlama3Projector.projector_output.dims == ("image_tokens", "hidden_size")


# -- each check fails on a family that breaks what it checks ----------------------------------------


class WrongContribution(QwenVisionAttention):
    """The attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("out_proj.input")


class FeaturesBeforeTheReadout(VideoLlama3Vision):
    """image_features read at the projector's first linear: one row per image token and the text's width, but not projected."""

    image_features = VideoLlama3Vision.image_features.at("/projector.readout.0.output", select=None)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {VideoLlama3VisionAttention: WrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {VideoLlama3VisionModel: FeaturesBeforeTheReadout}, "against image_features: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(tiny_checkpoint("video_llama_3"), family=with_envoys(video_llama_3, envoys), attn_implementation="eager")
    found = verdict(check, broken, PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
