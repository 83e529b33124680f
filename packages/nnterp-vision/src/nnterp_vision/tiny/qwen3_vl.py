"""The tiny checkpoint of Qwen3-VL: Qwen2-VL's image processor sized to its tower, under a Qwen3-VL processor.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .qwen2_vl import QWEN_TOKEN_FIELDS, QWEN_TOKENS, QwenVLTinyConfig


@dataclass(frozen=True)
class Qwen3VLTinyConfig(QwenVLTinyConfig):
    """A ``QwenVLTinyConfig`` whose processor is Qwen3-VL's: the same image processor, Qwen3-VL's video processor.

    The checks' 40 x 48 image is resized to 32 x 48: a 4 x 6 grid of
    8-pixel patches, 6 image tokens. The video processor needs torchvision.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Qwen3-VL processor: ``tokenizer`` with the image tokens, and an image processor sized to the tower."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
        from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # needs torchvision

        tokenizer.add_tokens(list(QWEN_TOKENS), special_tokens=True)
        for token, name in zip(QWEN_TOKENS, QWEN_TOKEN_FIELDS):
            found = tokenizer.convert_tokens_to_ids(token)
            if found != getattr(config, name):
                raise ValueError(
                    f"{self.model_type}: {token} is id {found}; the config's {name} is {getattr(config, name)}"
                )
        vision = config.vision_config
        fewest, most = self.pixels
        images = Qwen2VLImageProcessorPil(
            size={"shortest_edge": fewest, "longest_edge": most},
            patch_size=vision.patch_size,
            temporal_patch_size=vision.temporal_patch_size,
            merge_size=vision.spatial_merge_size,
        )
        # the processor requires its video processor; no video is ever traced
        videos = Qwen3VLVideoProcessor(
            patch_size=vision.patch_size,
            temporal_patch_size=vision.temporal_patch_size,
            merge_size=vision.spatial_merge_size,
        )
        Qwen3VLProcessor(image_processor=images, tokenizer=tokenizer, video_processor=videos).save_pretrained(directory)
