"""The tiny checkpoint of a Qwen-ViT wrapper (Qwen2-VL, Qwen2.5-VL): a Qwen2-VL processor sized to its tower.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig, add_tokens

#: the processor's tokens, in the order the tokenizer gains them: image, video, then the image's brackets
QWEN_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
#: the config fields that name them, in the same order
QWEN_TOKEN_FIELDS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
#: each wrapper's processor class, in its model type's processing module; both take Qwen2-VL's image and video processors
PROCESSORS = {
    "qwen2_vl": "Qwen2VLProcessor",
    "qwen2_5_vl": "Qwen2_5_VLProcessor",
    "hyperclovax_vision_v2": "HyperCLOVAXVisionV2Processor",
    "exaone4_5": "Exaone4_5_Processor",
    "llava_onevision1_5": "Exaone4_5_Processor",
}
#: the model type whose processing module holds a wrapper's processor, where it is another's (LLaVA-OneVision-1.5 has none)
PROCESSOR_MODULES = {"llava_onevision1_5": "exaone4_5"}


@dataclass(frozen=True)
class QwenVLTinyConfig(VisionTinyConfig):
    """A ``VisionTinyConfig`` whose processor is Qwen2-VL's (or Qwen2.5-VL's, the same over the same image processor).

    The tokenizer gains ``<|image_pad|>``, ``<|video_pad|>``,
    ``<|vision_start|>`` and ``<|vision_end|>`` (their ids must be the
    config's); the image processor resizes each image to a multiple of
    ``patch_size * spatial_merge_size`` on each side, keeping its aspect
    ratio, within ``PIXELS`` (so the checks' 40 x 48 image is 32 x 48: a
    4 x 6 grid of patches, 6 image tokens), and cuts it into patches two
    frames deep in merge-block order. Qwen2-VL's processor holds a video
    processor, which needs torchvision: without it neither this checkpoint
    nor any Qwen2-VL processor loads.
    """

    #: the fewest and the most pixels the image processor resizes an image to
    pixels: tuple[int, int] = (16 * 16 * 4, 48 * 48)

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Qwen processor: ``tokenizer`` with the image tokens, and an image processor sized to the tower."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        add_tokens(self.model_type, tokenizer, config, dict(zip(QWEN_TOKENS, QWEN_TOKEN_FIELDS)))
        vision = config.vision_config
        fewest, most = self.pixels
        sizes = {
            "patch_size": vision.patch_size,
            # a tower patching each frame alone (a 2D convolution: LLaVA-OneVision-1.5's) has no temporal_patch_size
            "temporal_patch_size": getattr(vision, "temporal_patch_size", 1),
            "merge_size": vision.spatial_merge_size,
        }
        images = Qwen2VLImageProcessorPil(size={"shortest_edge": fewest, "longest_edge": most}, **sizes)
        # the processor requires its video processor, which needs torchvision; no video is ever traced
        videos, processor = self.processor_classes()
        processor = processor(image_processor=images, tokenizer=tokenizer, video_processor=videos(**sizes))
        processor.save_pretrained(directory)

    def processor_classes(self) -> tuple[Any, Any]:
        """The video processor's class (Qwen2-VL's, which needs torchvision) and the processor's (the wrapper's own)."""
        import importlib

        from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

        module = PROCESSOR_MODULES.get(self.model_type, self.model_type)
        processing = importlib.import_module(f"transformers.models.{module}.processing_{module}")
        return Qwen2VLVideoProcessor, getattr(processing, PROCESSORS[self.model_type])
