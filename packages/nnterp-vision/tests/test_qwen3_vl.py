"""Qwen3-VL: the Qwen ViT's identities hold, the main merger's features are what the scatter hands the text model, and each DeepStack merger's output is what the text model adds after its layer."""

import pytest
import torch


from nnterp import Unavailable  # noqa: E402
from nnterp_conformance.checks import CHECKS  # noqa: E402
from nnterp_conformance.checks.vision import image  # noqa: E402
from nnterp_conformance.runner import PROMPTS, run  # noqa: E402
from nnterp_vision.components.qwen import PER_IMAGE  # noqa: E402
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision  # noqa: E402

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image, resized to 32 x 48: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge blocks, one token each
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("qwen3_vl")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))
    assert len(verdicts) == len(VISION_CHECKS) - 1


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, Qwen3Vision) and vision is model.model.visual and model.projector is vision.merger
    assert isinstance(model.projector, Qwen3Merger) and isinstance(vision.deepstack_merger_list[0], Qwen3Merger)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size, vision.spatial_merge_size, vision.window_size) == (8, 128, 2, None)
    assert vision.deepstack_layers == (0,) and vision.deepstack_mergers == [vision.deepstack_merger_list[0]]
    assert model.projector.projector_input_size == 64 == vision.deepstack_merger_list[0].projector_input_size
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.proj and layer.mlp.up_proj is layer.mlp.linear_fc1
    assert layer.mlp.down_proj is layer.mlp.linear_fc2 and layer.input_layernorm is layer.norm1


def read(model, plan, prompt=PROMPT):
    """Each ``(host, name)`` of ``plan`` in one image trace, in order."""
    values = []
    with torch.no_grad(), model.trace(prompt, images=[image()]):
        for host, name in plan:
            values.append(getattr(host(model), name).detach().clone().save())
    return values


def test_merger_feeds_the_scatter_and_deepstack_feeds_layer_one(model):
    vision, deep = (lambda m: m.vision), (lambda m: m.vision.deepstack_merger_list[0])
    mask, block0, deep_in, deep_out, merged_in, merged, tower, features, out0, in1 = read(
        model,
        [
            (vision, "image_token_mask"), (lambda m: m.vision.layers[0], "layer_output"),
            (deep, "projector_input"), (deep, "projector_output"),
            (lambda m: m.projector, "projector_input"), (lambda m: m.projector, "projector_output"),
            (vision, "tower_output"), (vision, "image_features"),
            (lambda m: m.layers[0], "layer_output"), (lambda m: m.layers[1], "layer_input"),
        ],
    )
    mask = mask.bool()
    assert int(mask.sum()) == TOKENS and block0.shape == (1, PATCHES, 64)
    # DeepStack merger 0 reads tower block 0's stream; the main merger the last block's; the scatter takes the main merger's output
    assert torch.equal(deep_in, block0[0]) and torch.equal(tower, merged_in[None])
    assert merged.shape == deep_out.shape == (TOKENS, 64) and torch.equal(merged, features)
    # the text model adds DeepStack merger 0's output after text layer 0, at the image tokens only
    assert torch.allclose(out0[mask] + deep_out, in1[mask], atol=1e-6)
    assert torch.equal(out0[~mask], in1[~mask])
    assert (out0[mask] - in1[mask]).abs().max() > 0


def test_written_deepstack_features_move_layer_one(model):
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        baseline = model.layers[1].layer_input.detach().clone().save()
        logits = model.logits.detach().clone().save()
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        model.vision.deepstack_merger_list[0].projector_output = torch.zeros(TOKENS, 64)
        out0 = model.layers[0].layer_output.detach().clone().save()
        zeroed = model.layers[1].layer_input.detach().clone().save()
        moved = model.logits.detach().clone().save()
    # with the addition zeroed, layer 1 receives layer 0's output unchanged
    assert torch.equal(out0, zeroed) and (zeroed - baseline).abs().max() > 0 and (moved - logits).abs().max() > 0


def test_no_image_makes_image_values_unavailable(model):
    with pytest.raises(Unavailable, match="passes no image"):
        with torch.no_grad(), model.trace("Hello world"):
            model.vision.deepstack_merger_list[0].projector_output.save()
    with torch.no_grad(), model.trace("Hello world"):
        out0 = model.layers[0].layer_output.save()
        in1 = model.layers[1].layer_input.save()
    assert torch.equal(out0, in1)  # no image: no DeepStack addition
