"""Qwen3.5 (and its mixture): Qwen3-VL's tower without DeepStack over a gated DeltaNet text model: the image's tokens enter the recurrent state."""

import torch
from nnterp_conformance.checks import verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS
from nnterp_recurrent.components import LinearAttention
from nnterp_vision.components.qwen3 import Qwen3Merger, Qwen3Vision
from vision_harness import MERGED_PATCHES, MERGED_TOKENS, QwenWrongContribution, VisionFamilyTests
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionAttention
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeVisionAttention

PROMPT = "<|image_pad|>Hello world"
PATCHES, TOKENS = MERGED_PATCHES, MERGED_TOKENS


def test_tree_has_no_deepstack_and_recurrent_text_blocks(model):
    vision = model.vision
    assert isinstance(vision, Qwen3Vision) and isinstance(model.projector, Qwen3Merger) and model.projector is vision.merger
    assert vision.deepstack_layers == () and vision.deepstack_mergers == []
    assert (vision.num_layers, vision.vision_hidden_size, vision.patch_size) == (2, 64, 8)
    kinds = {type(layer.linear_attn) for layer in model.layers if "linear_attn" in layer._module._modules}
    assert kinds == {type(model.layers[0].linear_attn)} and isinstance(model.layers[0].linear_attn, LinearAttention)


def test_image_tokens_enter_the_recurrent_state(model):
    mixer, last = model.layers[0].linear_attn, "Hello world<|image_pad|>"
    with torch.no_grad(), model.trace(last, images=[image()]):
        mask = model.vision.image_token_mask.save()
        merged = model.projector.projector_output.save()
        features = model.vision.image_features.save()
        stream = model.layers[0].layer_input.save()
        state = mixer.state_output.save()
    with torch.no_grad(), model.trace(last, images=[image()]):
        model.vision.image_features = torch.zeros_like(model.vision.image_features)
        blank = mixer.state_output.save()
    assert mask.sum() == TOKENS and merged.shape == (TOKENS, 64)
    assert torch.equal(merged, features) and torch.equal(stream[mask], features)
    # the DeltaNet state after the prompt's last token, an image token, holds what it wrote
    # (the random tiny model's decay forgets a token within a few steps, so the image comes last)
    assert (state - blank).abs().max() > 1e-4


def test_a_text_prompt_after_an_image_batch_continues_over_its_cache(model):
    # the wrapper keeps an image prompt's rope offsets (rope_deltas, here for a batch of 2); a text prompt does not
    # replace them, so without nnterp forgetting them at a fresh call its continuation took the image's offsets
    with torch.no_grad(), model.trace([PROMPT, "Hello there you"], images=[[image()], []]):
        pass
    found = verdict("split_prompt_continues", model, PROMPTS)
    assert found.status == "pass", str(found)


class TestQwen35(VisionFamilyTests):
    checkpoint = "qwen3_5"
    breaks = (
        ("vision_contribution", {Qwen3_5VisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )


class TestQwen35Moe(VisionFamilyTests):
    checkpoint = "qwen3_5_moe"
    breaks = (
        ("vision_contribution", {Qwen3_5MoeVisionAttention: QwenWrongContribution}, "against layer_output: off by"),
    )
