"""GLM-4.5V: GLM-4.1V's tower keeps its identities over a GLM-4-MoE text model whose mixtures (sigmoid router, shared expert) are served."""

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
from nnterp_vision.families import glm4v_moe
from transformers.models.glm4v_moe.modeling_glm4v_moe import Glm4vMoeTextMoE, Glm4vMoeVisionAttention

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("glm4v_moe")


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


def test_text_kit_passes_on_text_prompts(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=[name for name in CHECKS if name not in VISION_CHECKS])}
    failed = [str(v) for v in verdicts.values() if v.status != "pass"]
    assert not failed, "\n".join(failed)
    assert len(verdicts) >= 15 and "routing_follows_scoring" in verdicts


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, Glm4vVision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Glm4vMerger) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size) == (8, 64, 2)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # text block 0 is dense (first_k_dense_replace), block 1 a mixture: 4 routed experts, 2 per token, one shared
    dense, mixture = model.layers[0].mlp, model.layers[1].mlp
    assert isinstance(mixture, Moe) and (mixture.num_experts, mixture.top_k) == (4, 2) and mixture.router is mixture.gate
    assert model.support()["mlp.router_logits"] == {0: dense.no_mixture()} and not isinstance(vision.layers[0].mlp, Moe)


def test_image_tokens_route_through_the_mixture(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.detach().clone().save()
        stream = model.layers[0].layer_input.detach().clone().save()
        indices = model.layers[1].mlp.expert_indices.save()
        routed = model.layers[1].mlp.routed_output.detach().clone().save()
        shared = model.layers[1].mlp.shared_expert_output.detach().clone().save()
        contribution = model.layers[1].mlp.mlp_output.detach().clone().save()
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and features.shape == (TOKENS, 64) and torch.equal(stream[mask], features)
    # every token, image tokens included, picks 2 of the 4 experts; the shared expert adds beside them
    assert indices.shape[-1] == 2 and int(indices.max()) < 4
    assert torch.allclose(routed + shared, contribution, atol=1e-6)


class WrongContribution(QwenVisionAttention):
    """The attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("proj.input")


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {Glm4vMoeVisionAttention: WrongContribution}, "against layer_output: off by"),
        # the softmax mixture's routing is not this sigmoid router's
        ("routing_follows_scoring", {Glm4vMoeTextMoE: Moe}, "expert_weights against route(router_logits)"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    family = with_envoys(glm4v_moe, envoys)
    broken = StandardizedTransformer(tiny_checkpoint("glm4v_moe"), family=family, attn_implementation="eager")
    found = verdict(check, broken, PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
