"""Cosmos 3: Qwen3-VL under NVIDIA's config type; the family is Qwen3-VL's with Cosmos3OmniModel as the scatter."""

import pytest
import torch
from nnterp import StandardizedTransformer, Unavailable
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_vision.components import ImageScatter
from nnterp_vision.components.qwen import PER_IMAGE
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from nnterp_vision.families import cosmos3_omni
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("cosmos3_omni")


def broken(envoys):
    """The Cosmos 3 family with the module types of ``envoys`` keyed to other components."""
    return StandardizedTransformer(tiny_checkpoint("cosmos3_omni"), family=with_envoys(cosmos3_omni, envoys), attn_implementation="eager")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))


def test_tree_and_sizes(model):
    assert type(model._module).__name__ == "Cosmos3OmniForConditionalGeneration"
    assert isinstance(model.model, ImageScatter) and type(model.model._module).__name__ == "Cosmos3OmniModel"
    vision = model.vision
    assert isinstance(vision, Qwen3Vision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Qwen3Merger) and isinstance(vision.deepstack_merger_list[0], Qwen3Merger)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size) == (8, 128, 2)
    assert vision.deepstack_layers == (0,)
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.mlp.up_proj is layer.mlp.linear_fc1


def test_merger_output_is_scattered_and_deepstack_added_after_layer_zero(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        # in the order the forward computes them: DeepStack merger 0 runs after tower block 0, the main merger last
        mask = model.vision.image_token_mask.save()
        deep = model.vision.deepstack_merger_list[0].projector_output.save()
        merged = model.projector.projector_output.save()
        tower = model.vision.tower_output.save()
        features = model.vision.image_features.save()
        out0 = model.layers[0].layer_output.save()
        in1 = model.layers[1].layer_input.save()
    # 24 patches merged 2 x 2 into 6 image tokens; the scatter takes the main merger's output as it is
    assert int(mask.sum()) == TOKENS and tower.shape[-2:] == (PATCHES, 64)
    assert merged.shape == deep.shape == (TOKENS, 64) and torch.equal(merged, features)
    # DeepStack: merger 0's output is added to the stream at the image tokens after text layer 0
    torch.testing.assert_close(out0[mask] + deep, in1[mask])
    assert torch.equal(out0[~mask], in1[~mask])


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.image_features.save()


class FeaturesAtDeepStack(Qwen3Vision):
    """image_features read at DeepStack merger 0's output: the main merger's shape, the wrong tensor."""

    image_features = Qwen3Vision.image_features.at("deepstack_merger_list.0.output", select=None)


def test_check_fails_on_a_broken_family(model):
    assert verdict("image_features_reach_the_text", model, PROMPTS).status == "pass"
    found = verdict("image_features_reach_the_text", broken({Qwen3VLVisionModel: FeaturesAtDeepStack}), PROMPTS)
    assert found.status == "fail" and "against image_features: off by" in found.detail, str(found)
