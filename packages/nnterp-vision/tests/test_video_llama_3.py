"""VideoLLaMA3: the packed SigLIP-named tower keeps the blocks' identities, its final norm is tower_output, and the projector's rows are what the text model receives."""

import pytest
import torch
from nnterp import Unavailable
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.components.video_llama_3 import VideoLlama3Projector, VideoLlama3Vision
from vision_harness import OutProjWrongContribution, VisionFamilyTests, read
from transformers.models.video_llama_3.modeling_video_llama_3 import VideoLlama3VisionAttention, VideoLlama3VisionModel

PROMPT = "<|image_pad|>Hello world"
#: the checks' 40 x 48 image, kept 40 x 48: a 5 x 6 grid of 8-pixel patches, one image token each (images merge by 1)
PATCHES = TOKENS = 30


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, VideoLlama3Vision) and vision is model.model.vision_model and model.projector is model.model.projector
    assert isinstance(model.projector, VideoLlama3Projector) and isinstance(vision.layers[0].self_attn, QwenVisionAttention)
    assert vision.layers is vision.encoder.layers and vision.patch_embed is vision.embeddings.patch_embedding
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 32, 2, 16)
    assert (vision.patch_size, vision.intermediate_size, model.projector.projector_input_size) == (8, 64, 32)
    with pytest.raises(Unavailable, match="any resolution"):
        vision.image_size
    with pytest.raises(Unavailable, match="image_merge_sizes"):
        vision.spatial_merge_size
    layer = vision.layers[0]
    assert layer.self_attn.o_proj is layer.self_attn.out_proj and layer.mlp.down_proj is layer.mlp.fc2


def test_final_norm_resample_and_projector(model):
    mask, patches, last, tower, merged_in, merged, features = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.layers.-1.layer_output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    assert int(mask.sum()) == TOKENS and patches.shape == tower.shape == (1, PATCHES, 32)
    # tower_output is the final norm of the last block's stream
    assert torch.equal(tower, model.model.vision_model.post_layernorm(last))
    # at an image's merge size of 1 the resampling keeps every row: the projector takes tower_output, row by row
    assert torch.allclose(merged_in, tower[0], atol=1e-6)
    assert merged.shape == (TOKENS, 64) and torch.equal(merged, features)
    assert VideoLlama3Projector.projector_input.dims == ("image_tokens", "projector_input_size")
    assert VideoLlama3Projector.projector_output.dims == ("image_tokens", "hidden_size")


# -- each check fails on a family that breaks what it checks ----------------------------------------


class FeaturesBeforeTheReadout(VideoLlama3Vision):
    """image_features read at the projector's first linear: one row per image token and the text's width, but not projected."""

    image_features = VideoLlama3Vision.image_features.at("/projector.readout.0.output", select=None)


class TestVideoLlama3(VisionFamilyTests):
    checkpoint = "video_llama_3"
    breaks = (
        ("vision_contribution", {VideoLlama3VisionAttention: OutProjWrongContribution}, "against layer_output: off by"),
        ("image_features_reach_the_text", {VideoLlama3VisionModel: FeaturesBeforeTheReadout}, "against image_features: off by"),
    )
