"""The tiny checkpoint of Qwen3-VL: Qwen2-VL's image processor sized to its tower, under a Qwen3-VL processor.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .qwen2_vl import QwenVLTinyConfig


@dataclass(frozen=True)
class Qwen3VLTinyConfig(QwenVLTinyConfig):
    """A ``QwenVLTinyConfig`` whose processor is Qwen3-VL's: the same image processor, Qwen3-VL's video processor.

    The checks' 40 x 48 image is resized to 32 x 48: a 4 x 6 grid of
    8-pixel patches, 6 image tokens. The video processor needs torchvision.
    """

    def processor_classes(self) -> tuple[Any, Any]:
        """Qwen3-VL's video processor's class (which needs torchvision) and its processor's."""
        from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

        return Qwen3VLVideoProcessor, Qwen3VLProcessor
