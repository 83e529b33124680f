"""The tiny checkpoint of VideoLLaMA3: its processor sized to the tower, and its sub-configs sized whole.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import add_tokens
from .qwen2_vl import QwenVLTinyConfig
from .sizes import QWEN2_SIZED

#: the processor's tokens and the config fields naming them
VIDEO_LLAMA_3_TOKENS = {"<|image_pad|>": "image_token_id", "<|video_pad|>": "video_token_id"}


@dataclass(frozen=True)
class VideoLlama3TinyConfig(QwenVLTinyConfig):
    """A ``QwenVLTinyConfig`` whose processor is VideoLLaMA3's: patches one frame deep, images unmerged (merge size 1).

    The image processor resizes each image to a multiple of ``patch_size``
    within ``pixels``: the checks' 40 x 48 image stays 40 x 48, a 5 x 6
    grid of 8-pixel patches, 30 image tokens. The video processor needs torchvision.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the VideoLLaMA3 processor: ``tokenizer`` with the image tokens, and image and video processors sized to the tower."""
        from transformers.models.video_llama_3.image_processing_pil_video_llama_3 import VideoLlama3ImageProcessorPil
        from transformers.models.video_llama_3.processing_video_llama_3 import VideoLlama3Processor
        from transformers.models.video_llama_3.video_processing_video_llama_3 import VideoLlama3VideoProcessor

        add_tokens(self.model_type, tokenizer, config, VIDEO_LLAMA_3_TOKENS)
        fewest, most = self.pixels
        patch = config.vision_config.patch_size
        images = VideoLlama3ImageProcessorPil(size={"shortest_edge": fewest, "longest_edge": most}, patch_size=patch)
        videos = VideoLlama3VideoProcessor(patch_size=patch)
        VideoLlama3Processor(image_processor=images, tokenizer=tokenizer, video_processor=videos).save_pretrained(
            directory
        )


#: a tower 32 wide (2 heads of 16) apart from the text's 64
VIDEO_LLAMA_3_VIT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "patch_size": 8,
}
#: the checks' image: 5 x 6 patches, one image token each; Qwen2's text model whole (built through AutoConfig, unshrunk)
TINY = VideoLlama3TinyConfig(
    "video_llama_3",
    {"text_config": QWEN2_SIZED, "vision_config": VIDEO_LLAMA_3_VIT, "image_token_id": 300, "video_token_id": 301},
    pixels=(8 * 8 * 4, 48 * 48),
)
