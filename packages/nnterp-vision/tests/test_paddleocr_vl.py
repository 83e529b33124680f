"""PaddleOCR-VL: the packed SigLIP-named tower keeps the blocks' identities, its attention is read whole, and the projector outside it merges what the text model receives."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.base import Case
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components.paddleocr_vl import PaddleOcrProjector, PaddleOcrVision
from nnterp_vision.components.qwen import PER_IMAGE, QwenVisionAttention
from nnterp_vision.families import paddleocr_vl
from transformers.models.paddleocr_vl.modeling_paddleocr_vl import PaddleOCRVisionAttention, PaddleOCRVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|IMAGE_PLACEHOLDER|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("paddleocr_vl")


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
    assert isinstance(vision, PaddleOcrVision) and vision is model.model.visual and model.projector is model.model.projector
    assert isinstance(model.projector, PaddleOcrProjector) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert vision.layers is vision.vision_model.encoder.layers and vision.patch_embed is vision.vision_model.embeddings.patch_embedding
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size) == (8, 64, 2)
    assert model.projector.projector_input_size == 32
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.out_proj and layer.mlp.up_proj is layer.mlp.fc1
    assert layer.input_layernorm is layer.layer_norm1 and layer.mlp.act_fn is layer.mlp.activation_fn


def test_attention_whole_and_the_merge_outside_the_tower(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.detach().clone().save()
        attention = model.vision.layers[1].self_attn
        queries = attention.attention_queries.detach().clone().save()
        keys = attention.attention_keys.detach().clone().save()
        values = attention.attention_values.detach().clone().save()
        heads = attention.attention_head_outputs.detach().clone().save()
        contribution = attention.attention_output.detach().clone().save()
        tower = model.vision.tower_output.detach().clone().save()
        merged_in = model.projector.projector_input.detach().clone().save()
        merged = model.projector.projector_output.detach().clone().save()
        features = model.vision.image_features.detach().clone().save()
    assert int(mask.sum()) == TOKENS and patches.shape == tower.shape == (1, PATCHES, 32)
    assert queries.shape == keys.shape == values.shape == (1, 2, PATCHES, 16) and heads.shape == (1, PATCHES, 2, 16)
    projection = model.vision.layers[1].self_attn.o_proj._module
    assert torch.allclose(projection(heads.flatten(-2)), contribution, atol=1e-6)
    # one image: its head outputs are softmax(q k^T / sqrt(d)) v over its whole row of patches
    pattern = torch.softmax(queries @ keys.transpose(-1, -2) / 4, dim=-1)
    assert torch.allclose((pattern @ values).transpose(1, 2), heads, atol=1e-6)
    # the projector takes the tower's normed output whole and merges 2 x 2; the scatter hands its output on unchanged
    assert torch.equal(merged_in, tower[0]) and merged.shape == (TOKENS, 64) and torch.equal(merged, features)


# -- each check fails on a family that breaks what it checks ----------------------------------------


class WrongContribution(QwenVisionAttention):
    """The attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("out_proj.input")


class FeaturesBeforeMerging(PaddleOcrVision):
    """image_features read at the projector's norm: one row per patch, before the 2 x 2 merge."""

    image_features = PaddleOcrVision.image_features.at("/projector.pre_norm.output", select=None)


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {PaddleOCRVisionAttention: WrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {PaddleOCRVisionModel: FeaturesBeforeMerging}, "6 image tokens against 24 rows of image_features"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert verdict(check, model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(tiny_checkpoint("paddleocr_vl"), family=with_envoys(paddleocr_vl, envoys), attn_implementation="eager")
    found = verdict(check, broken, PROMPTS)
    assert found.status == "fail" and message in found.detail, str(found)
