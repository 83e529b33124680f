"""GLM-4.6V: GLM-4.1V's tower under Glm46VModel, on GLM-4.1V's text model (the default) or GLM-4.5V's mixture (``glm46v_moe``)."""

import pytest
import torch
from nnterp import Moe, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.glm4v import Glm4vMerger, Glm4vVision
from nnterp_vision.components.qwen import PER_IMAGE, QwenVisionAttention
from nnterp_vision.families import glm46v, glm46v_moe
from transformers.models.glm4v.modeling_glm4v import Glm4vVisionAttention
from transformers.models.glm4v_moe.modeling_glm4v_moe import Glm4vMoeVisionAttention

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6
#: each checkpoint, the family module that serves it, and its tower's attention type
CHECKPOINTS = {"glm46v": (glm46v, Glm4vVisionAttention), "glm46v_moe": (glm46v_moe, Glm4vMoeVisionAttention)}


@pytest.fixture(scope="module", params=list(CHECKPOINTS))
def model(tiny_model, request):
    torch.set_num_threads(1)
    return tiny_model(request.param)


def name(model):
    return "glm46v_moe" if model.family is glm46v_moe else "glm46v"


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


def test_the_config_names_the_family_and_the_tree(model):
    family, attention = CHECKPOINTS[name(model)]
    assert model.family is family and type(model.vision.layers[0].self_attn._module) is attention
    vision = model.vision
    assert isinstance(vision, Glm4vVision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Glm4vMerger) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (2, 32, 2, 64)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # GLM-4.1V's text model has dense blocks; GLM-4.5V's a dense block 0, then a mixture with a shared expert
    mixture = model.layers[1].mlp
    assert isinstance(mixture, Moe) == (family is glm46v_moe)
    if family is glm46v_moe:
        assert (mixture.num_experts, mixture.top_k) == (4, 2) and mixture.router is mixture.gate


def test_final_norm_and_merger_feed_the_scatter(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        last = model.vision.layers[-1].layer_output.detach().clone().save()
        tower = model.vision.tower_output.detach().clone().save()
        merged_in = model.projector.projector_input.detach().clone().save()
        merged = model.projector.projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
    visual = model.model.visual
    assert int(mask.sum()) == TOKENS and tower.shape == (1, PATCHES, 32) and torch.equal(tower, visual.post_layernorm(last))
    blocks = tower[0].view(-1, 2, 2, 32).permute(0, 3, 1, 2)
    assert torch.allclose(visual.downsample(blocks).view(-1, 64), merged_in, atol=1e-6)
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)


class WrongContribution(QwenVisionAttention):
    """The attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("proj.input")


def test_check_fails_on_a_broken_family(model):
    family, attention = CHECKPOINTS[name(model)]
    assert verdict("vision_contribution", model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(
        tiny_checkpoint(name(model)), family=with_envoys(family, {attention: WrongContribution}), attn_implementation="eager"
    )
    found = verdict("vision_contribution", broken, PROMPTS)
    assert found.status == "fail" and "against layer_output: off by" in found.detail, str(found)
