"""Qwen3-VL-MoE: Qwen3-VL's tower, mergers and DeepStack keep their identities over a Qwen3-MoE text model whose mixtures are served."""

import pytest
import torch
from nnterp import Moe, StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.qwen import PER_IMAGE, QwenVisionAttention
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from nnterp_vision.families import qwen3_vl_moe
from transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe import Qwen3VLMoeTextSparseMoeBlock, Qwen3VLMoeVisionAttention

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("qwen3_vl_moe")


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
    # a mixture has no one activation or neurons tensor per block
    neurons = verdicts.pop("neurons_make_contribution")
    assert neurons.status == "skip" and "mixture of experts" in neurons.detail, str(neurons)
    failed = [str(v) for v in verdicts.values() if v.status != "pass"]
    assert not failed, "\n".join(failed)
    assert len(verdicts) >= 15 and "routing_follows_scoring" in verdicts


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, Qwen3Vision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Qwen3Merger) and isinstance(vision.deepstack_merger_list[0], Qwen3Merger)
    assert isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.deepstack_layers) == (8, 128, 2, (0,))
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    # the text model's blocks are mixtures: 4 experts, 2 per token, the router under its standard name
    mlp = model.layers[0].mlp
    assert isinstance(mlp, Moe) and (mlp.num_experts, mlp.top_k) == (4, 2) and mlp.router is mlp.gate
    assert not isinstance(vision.layers[0].mlp, Moe) and vision.layers[0].mlp.up_proj is vision.layers[0].mlp.linear_fc1


def test_image_tokens_route_through_the_mixture(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        deep = model.vision.deepstack_merger_list[0].projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
        stream = model.layers[0].layer_input.detach().clone().save()
        indices = model.layers[0].mlp.expert_indices.save()
        routed = model.layers[0].mlp.routed_output.detach().clone().save()
        contribution = model.layers[0].mlp.mlp_output.detach().clone().save()
        out0 = model.layers[0].layer_output.detach().clone().save()
        in1 = model.layers[1].layer_input.detach().clone().save()
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and features.shape == deep.shape == (TOKENS, 64)
    assert torch.equal(stream[mask], features)
    # every token, image tokens included, picks 2 of the 4 experts; the mixture adds what the experts sum to
    assert indices.shape[-1] == 2 and int(indices.max()) < 4 and torch.equal(routed, contribution)
    # DeepStack merger 0's output is added after text layer 0, at the image tokens only
    assert torch.allclose(out0[mask] + deep, in1[mask], atol=1e-6) and torch.equal(out0[~mask], in1[~mask])


class WrongContribution(QwenVisionAttention):
    """The attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("proj.input")


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {Qwen3VLMoeVisionAttention: WrongContribution}, "against layer_output: off by"),
        # the plain mixture reads norm_topk_prob, which this router has not: it renormalizes always
        ("routing_follows_scoring", {Qwen3VLMoeTextSparseMoeBlock: Moe}, "expert_weights against route(router_logits)"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    family = with_envoys(qwen3_vl_moe, envoys)
    broken = StandardizedTransformer(tiny_checkpoint("qwen3_vl_moe"), family=family, attn_implementation="eager")
    found = verdict(check, broken, PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
