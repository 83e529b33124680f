"""Qwen2-VL: the packed Qwen ViT's blocks keep the text blocks' identities, its attention is read whole, and the merged features are what the text model receives."""

import pytest
import torch


from nnterp import EProperty, StandardizedTransformer, Unavailable  # noqa: E402
from nnterp_conformance.checkpoints import tiny_checkpoint  # noqa: E402
from nnterp_conformance.checks import CHECKS  # noqa: E402
from nnterp_conformance.checks.vision import image  # noqa: E402
from nnterp_conformance.runner import PROMPTS, run  # noqa: E402
from nnterp_conformance.variants import assert_breaks, with_envoys
from nnterp_vision.components import no_images  # noqa: E402
from nnterp_vision.components.qwen import PER_IMAGE, QwenVision  # noqa: E402
from nnterp_vision.families import qwen2_vl  # noqa: E402
from nnterp_vision.layouts import ImageFeatures  # noqa: E402
from nnterp_vision.testing import QwenWrongContribution
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel  # noqa: E402
from transformers.models.qwen2_vl.modeling_qwen2_vl import VisionAttention as QwenAttention  # noqa: E402

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("qwen2_vl")


def broken(envoys):
    """The Qwen2-VL family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("qwen2_vl"), family=with_envoys(qwen2_vl, envoys), attn_implementation="eager")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))
    assert len(verdicts) == len(VISION_CHECKS) - 1


def test_tree_and_sizes(model):
    vision = model.vision
    assert vision is model.model.visual and model.projector is vision.merger and vision.projector is model.projector
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 128, 2, None)
    assert model.projector.projector_input_size == 64
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    attention = vision.layers[0].self_attn
    assert attention.o_proj is attention.proj and vision.layers[0].mlp.up_proj is vision.layers[0].mlp.fc1
    assert vision.layers[0].input_layernorm is vision.layers[0].norm1


def test_scores_and_pattern_are_per_image(model):
    support = model.vision.support()
    assert support["self_attn.attention_probabilities"] == {0: PER_IMAGE, 1: PER_IMAGE}
    assert support["self_attn.attention_scores"] == {0: PER_IMAGE, 1: PER_IMAGE}
    assert not support["self_attn.attention_queries"] and not support["self_attn.attention_head_outputs"]
    with pytest.raises(Unavailable, match="splits its queries"):
        with torch.no_grad(), model.trace(PROMPT, images=[image()]):
            model.vision.layers[0].self_attn.attention_probabilities.save()


def read(model, plan, prompt=PROMPT):
    """Each ``(host, name)`` of ``plan`` in one image trace, in order."""
    values = []
    with torch.no_grad(), model.trace(prompt, images=[image()]):
        for host, name in plan:
            values.append(getattr(host(model), name).detach().clone())
    return values


def test_packed_values_and_the_merge(model):
    vision, attention = (lambda m: m.vision), (lambda m: m.vision.layers[1].self_attn)
    mask, patches, queries, keys, values, heads, contribution, merged_in, merged, tower, features = read(
        model,
        [
            (vision, "image_token_mask"), (vision, "patch_embeddings"),
            (attention, "attention_queries"), (attention, "attention_keys"), (attention, "attention_values"),
            (attention, "attention_head_outputs"), (attention, "attention_output"),
            (lambda m: m.projector, "projector_input"), (lambda m: m.projector, "projector_output"),
            (vision, "tower_output"), (vision, "image_features"),
        ],
    )
    assert int(mask.sum()) == TOKENS and patches.shape == (1, PATCHES, 64)
    assert queries.shape == keys.shape == values.shape == (1, 4, PATCHES, 16) and heads.shape == (1, PATCHES, 4, 16)
    # the per-image head outputs, concatenated back, are what the output projection takes
    projection = model.vision.layers[1].self_attn.o_proj._module
    assert torch.allclose(projection(heads.flatten(-2)), contribution, atol=1e-6)
    # one image: its head outputs are softmax(q k^T / sqrt(d)) v over its whole row of patches
    pattern = torch.softmax(queries @ keys.transpose(-1, -2) / 4, dim=-1)
    assert torch.allclose((pattern @ values).transpose(1, 2), heads, atol=1e-6)
    # the merger takes the last block's stream as the tower holds it; Qwen2-VL scatters its output unchanged
    assert torch.equal(merged_in, tower[0]) and merged.shape == (TOKENS, 64) and torch.equal(merged, features)


def test_writes_land_on_the_packed_row(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        baseline = model.vision.layers[1].layer_output.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        model.vision.layers[0].self_attn.attention_queries[:, 0] = 0
        edited = model.vision.layers[1].layer_output.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        outputs = model.vision.layers[0].layer_output.detach().clone().save()
        model.vision.layers[0].layer_output = outputs * 2
        doubled = model.vision.layers[1].layer_input.detach().clone().save()
    assert (edited - baseline).abs().max() > 0
    # a written [1, patches, width] is squeezed back into the block's [patches, width]
    assert doubled.shape == (1, PATCHES, 64) and torch.equal(doubled, outputs * 2)


def test_head_outputs_hold_under_sdpa(tiny_model):
    model = tiny_model("qwen2_vl", attn_implementation="sdpa")
    attention = lambda m: m.vision.layers[0].self_attn  # noqa: E731
    heads, contribution = read(model, [(attention, "attention_head_outputs"), (attention, "attention_output")])
    projection = model.vision.layers[0].self_attn.o_proj._module
    assert torch.allclose(projection(heads.flatten(-2)), contribution, atol=1e-6)


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.layers[0].self_attn.attention_queries.save()
    with torch.no_grad(), model.trace("Hello world"):
        text = model.layers[0].layer_output.save()  # the text model's values are untouched
    assert text.shape[-1] == 64


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeMerging(QwenVision):
    """image_features read at the merger's norm: each merge block's first patch, normed, not merged."""

    @EProperty("/projector.ln_q.output", "The merger's norm", no_images)
    def image_features(self, value: torch.Tensor) -> ImageFeatures:
        return value.view(-1, 4 * value.shape[-1])[:, : value.shape[-1]]


class FeaturesAtTheCount(QwenVision):
    """image_features read where the wrapper counts them against the placeholders: equal, and causally inert."""

    image_features = QwenVision.image_features.at(
        "/model.source.self_get_placeholder_mask_0.inputs", select="image_features"
    )


@pytest.mark.parametrize(
    ("check", "envoys", "message"),
    [
        ("vision_contribution", {QwenAttention: QwenWrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {Qwen2VisionTransformerPretrainedModel: FeaturesBeforeMerging}, "against image_features: off by"),
        ("written_image_values_move_downstream", {Qwen2VisionTransformerPretrainedModel: FeaturesAtTheCount}, "left the logits unchanged"),
    ],
)
def test_check_fails_on_a_broken_family(model, check, envoys, message):
    assert_breaks(check, model, broken(envoys), message)
