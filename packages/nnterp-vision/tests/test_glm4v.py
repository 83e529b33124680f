"""GLM-4.1V: the packed Qwen-like ViT keeps the blocks' identities, its final norm is tower_output, and the downsampled, merged features are what the text model receives."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import PER_IMAGE, QwenVisionAttention
from nnterp_vision.families import glm4v
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention, Glm4vVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("glm4v")


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
    assert isinstance(vision, Glm4vVision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Glm4vMerger) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    # the tower is 32 wide (2 heads of 16), its blocks' MLP out_hidden_size (64) wide; the merger takes 64-wide rows
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 64, 2, None)
    assert vision.layers[0].mlp.intermediate_size == 64 and model.projector.projector_input_size == 64
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.input_layernorm is layer.norm1
    # the text model is GLM-4's sandwich block: the contributions are the post-sublayer norms' outputs
    assert model.layers[0].mlp.act_fn is model.layers[0].mlp.activation_fn


def test_final_norm_downsample_and_merger(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.detach().clone().save()
        last = model.vision.layers[-1].layer_output.detach().clone().save()
        tower = model.vision.tower_output.detach().clone().save()
        merged_in = model.projector.projector_input.detach().clone().save()
        merged = model.projector.projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
    visual = model.model.visual
    assert int(mask.sum()) == TOKENS and patches.shape == last.shape == tower.shape == (1, PATCHES, 32)
    # tower_output is the final norm of the last block's stream
    assert torch.equal(tower, visual.post_layernorm(last))
    # the strided convolution folds each 2 x 2 merge block (4 consecutive patches) into one 64-wide row: the merger's input
    blocks = tower[0].view(-1, 2, 2, 32).permute(0, 3, 1, 2)
    assert torch.allclose(visual.downsample(blocks).view(-1, 64), merged_in, atol=1e-6) and merged_in.shape == (TOKENS, 64)
    # the scatter hands the merger's output on unchanged
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)


def test_patch_embeddings_reach_the_tower_through_its_norm(model):
    # the check's default edit halves patch_embeddings, which the RMS norm after the convolution undoes (up to eps);
    # noise is not undone
    found = verdict("written_image_values_move_downstream", model, Case(tuple(PROMPTS), edit="noise"))
    assert found.status == "pass", str(found)
    shift = float(found.detail.rsplit("up to ", 1)[1])
    assert shift > 0.1, found.detail


# -- each check fails on a family that breaks what it checks ----------------------------------------


class WrongContribution(QwenVisionAttention):
    """The attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("proj.input")


class FeaturesBeforeMerging(Glm4vVision):
    """image_features read at the merger's input, the downsampled rows: the right shape, not what the text receives."""

    image_features = Glm4vVision.image_features.at("merger.input", select=0)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {Glm4vVisionAttention: WrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {Glm4vVisionModel: FeaturesBeforeMerging}, "against image_features: off by"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(tiny_checkpoint("glm4v"), family=with_envoys(glm4v, envoys), attn_implementation="eager")
    found = verdict(check, broken, PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
