"""EXAONE 4.5: Qwen2.5-VL's tower with grouped-query attention: keys and values have fewer heads, read whole before the per-image split."""

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp_conformance.checkpoints import tiny_checkpoint
from nnterp_conformance.checks import CHECKS, verdict
from nnterp_conformance.checks.vision import image
from nnterp_conformance.runner import PROMPTS, run
from nnterp_conformance.variants import with_envoys
from nnterp_text.families import olmo2
from nnterp_vision.components.qwen import PER_IMAGE, QwenMerger, QwenVision
from nnterp_vision.families import exaone4_5
from nnterp_vision.testing import QwenWrongContribution
from transformers.models.exaone4_5.modeling_exaone4_5 import Exaone4_5_VisionAttention

VISION_CHECKS = [name for name, found in CHECKS.items() if found.kind == "vision"]
PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image resized to 32 x 48: 4 x 6 patches, merged 2 x 2 into 6 image tokens
PATCHES, TOKENS = 24, 6


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.set_num_threads(1)
    return tiny_model("exaone4_5")


def test_vision_checks_pass_but_the_pattern_skips(model):
    verdicts = {v.name: v for v in run(model, PROMPTS, only=VISION_CHECKS)}
    pattern = verdicts.pop("vision_pattern_is_softmax_of_scores")
    assert pattern.status == "skip" and PER_IMAGE in pattern.detail, str(pattern)
    assert [v.status for v in verdicts.values()] == ["pass"] * len(verdicts), "\n".join(map(str, verdicts.values()))


def test_tree(model):
    assert isinstance(model.vision, QwenVision) and isinstance(model.projector, QwenMerger)
    assert model.vision is model.model.visual and model.projector is model.vision.merger
    assert all(isinstance(layer.self_attn, olmo2.PostNormAttention) for layer in model.layers)


def test_keys_and_values_have_fewer_heads(model):
    attention = model.vision.layers[0].self_attn
    with torch.no_grad(), model.trace(PROMPT, images=[image()]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
        heads = attention.attention_head_outputs.save()
    assert queries.shape == (1, 4, PATCHES, 16) and keys.shape == values.shape == (1, 2, PATCHES, 16)
    assert heads.shape == (1, PATCHES, 4, 16)


def test_check_fails_on_a_broken_family(model):
    assert verdict("vision_contribution", model, PROMPTS).status == "pass"
    broken = StandardizedTransformer(
        tiny_checkpoint("exaone4_5"), family=with_envoys(exaone4_5, {Exaone4_5_VisionAttention: QwenWrongContribution}), attn_implementation="eager"
    )
    found = verdict("vision_contribution", broken, PROMPTS)
    assert found.status == "fail" and "against layer_output: off by" in found.detail, str(found)
