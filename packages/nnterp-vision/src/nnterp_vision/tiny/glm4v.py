"""The tiny checkpoint of a GLM-4V wrapper (GLM-4.1V, GLM-4.5V, GLM-4.6V): its processor sized to the Qwen-like tower.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import add_tokens
from .qwen2_vl import QwenVLTinyConfig
from .sizes import TEXT_SIZES

#: the processor's tokens, in the order the tokenizer gains them, and the config fields that name them
GLM_TOKENS = {
    "<|image|>": "image_token_id",
    "<|video|>": "video_token_id",
    "<|begin_of_image|>": "image_start_token_id",
    "<|end_of_image|>": "image_end_token_id",
    "<|begin_of_video|>": "video_start_token_id",
    "<|end_of_video|>": "video_end_token_id",
}
#: their ids: after the tokenizer's 300 entries
GLM_TOKEN_IDS = {field: 300 + index for index, field in enumerate(GLM_TOKENS.values())}


@dataclass(frozen=True)
class Glm4vTinyConfig(QwenVLTinyConfig):
    """A ``QwenVLTinyConfig`` whose processor is GLM-4V's: ``<|image|>`` placeholders, an image processor sized to the tower.

    GLM's resizing counts both frames of a patch against its pixel bounds,
    so they are twice Qwen2-VL's: the checks' 40 x 48 image is resized to
    32 x 48, a 4 x 6 grid of 8-pixel patches, 6 image tokens. ``processor``
    names the model type whose processor, image processor and video
    processor (which needs torchvision) are saved, by class name prefix.
    """

    pixels: tuple[int, int] = (2 * 16 * 16 * 4, 2 * 48 * 48)
    #: ``(module, class prefix)`` of the processor classes: GLM-4.1V's, unless the wrapper has its own (GLM-4.6V)
    processor: tuple[str, str] = ("glm4v", "Glm4v")
    #: the processor's tokens in the order the tokenizer gains them, each with the config field naming its id
    tokens: tuple[tuple[str, str], ...] = tuple(GLM_TOKENS.items())

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the GLM processor: ``tokenizer`` with the image tokens, and image and video processors sized to the tower."""
        add_tokens(self.model_type, tokenizer, config, dict(self.tokens))
        module, prefix = self.processor
        package = f"transformers.models.{module}"
        images = getattr(
            importlib.import_module(f"{package}.image_processing_pil_{module}"), f"{prefix}ImageProcessorPil"
        )
        videos = getattr(importlib.import_module(f"{package}.video_processing_{module}"), f"{prefix}VideoProcessor")
        processor = getattr(importlib.import_module(f"{package}.processing_{module}"), f"{prefix}Processor")
        vision = config.vision_config
        sizes = {
            "patch_size": vision.patch_size,
            "temporal_patch_size": vision.temporal_patch_size,
            "merge_size": vision.spatial_merge_size,
        }
        fewest, most = self.pixels
        processor(
            image_processor=images(size={"shortest_edge": fewest, "longest_edge": most}, **sizes),
            tokenizer=tokenizer,
            video_processor=videos(**sizes),
        ).save_pretrained(directory)


#: GLM-4's text model on 3D rotary positions over half of each 16-wide head: mrope_section sums to 16 * 0.5 // 2
GLM4V_TEXT = {
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "mrope_section": [2, 1, 1],
    }
}
#: a tower 32 wide (2 heads of 16) apart from the text's 64: its blocks' MLP is out_hidden_size (the text width) wide,
#: its merger's intermediate_size; the learned position grid is square, (image_size / patch_size) ** 2 = 16
GLM4V_VIT = {
    "depth": 2,
    "hidden_size": 32,
    "num_heads": 2,
    "out_hidden_size": 64,
    "intermediate_size": 128,
    "patch_size": 8,
    "image_size": 32,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}

#: the checks' image: 4x6 patches, merged 2x2 into 6 image tokens
TINY = Glm4vTinyConfig("glm4v", {"text_config": GLM4V_TEXT, "vision_config": GLM4V_VIT, **GLM_TOKEN_IDS})
#: GLM-4.5V: the same tower and processor on a GLM-4-MoE text model (4 routed experts, top 2, one shared); block 0 dense
TINY_MOE = Glm4vTinyConfig("glm4v_moe", {"text_config": GLM4V_TEXT, "vision_config": GLM4V_VIT, **GLM_TOKEN_IDS})
#: GLM-4.1V's text model, whole: GLM-4.6V builds its sub-configs through AutoConfig, which TinyConfig does not shrink
GLM4V_TEXT_SIZED = {"model_type": "glm4v_text", **TEXT_SIZES, **GLM4V_TEXT}
#: GLM-4.6V: GLM-4.1V's tower and text model (its defaults) under its own processor, the same as GLM-4.1V's
TINY_46V = Glm4vTinyConfig(
    "glm46v",
    {"text_config": GLM4V_TEXT_SIZED, "vision_config": {"model_type": "glm4v_vision", **GLM4V_VIT}, **GLM_TOKEN_IDS},
    processor=("glm46v", "Glm46V"),
)
#: GLM-4.5V's text model, whole, for GLM-4.6V: 4 routed experts, 2 per token, one shared; block 0 dense
GLM4V_MOE_TEXT_SIZED = {
    **GLM4V_TEXT_SIZED,
    "model_type": "glm4v_moe_text",
    "moe_intermediate_size": 32,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
}
#: GLM-4.6V on GLM-4.5V's tower and MoE text model (the large checkpoint), served by ``glm46v_moe``
TINY_46V_MOE = Glm4vTinyConfig(
    "glm46v",
    {
        "text_config": GLM4V_MOE_TEXT_SIZED,
        "vision_config": {"model_type": "glm4v_moe_vision", **GLM4V_VIT},
        **GLM_TOKEN_IDS,
    },
    processor=("glm46v", "Glm46V"),
)
