"""The tiny checkpoint of Ovis2.5: its processor sized to the tower, a visual vocabulary of 36 words.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import check_token_ids, with_named_tokens
from .qwen2_vl import QwenVLTinyConfig
from .sizes import TEXT, TOWER

#: the processor's tokens, added in this order after the tokenizer's 300 entries, and the tokenizer attributes naming them
OVIS2_5_TOKENS = {
    "image_token": "<ovis_image_atom>",
    "video_token": "<ovis_video_atom>",
    "image_start_token": "<ovis_image_start>",
    "image_end_token": "<ovis_image_end>",
    "video_start_token": "<ovis_video_start>",
    "video_end_token": "<ovis_video_end>",
}
#: the config fields naming the same tokens, in the same order
OVIS2_5_TOKEN_FIELDS = {
    "image_token": "image_token_id",
    "video_token": "video_token_id",
    "image_start_token": "image_start_token_id",
    "image_end_token": "image_end_token_id",
    "video_start_token": "video_start_token_id",
    "video_end_token": "video_end_token_id",
}


@dataclass(frozen=True)
class Ovis2TinyConfig(QwenVLTinyConfig):
    """A ``QwenVLTinyConfig`` whose processor is Ovis2.5's: patches one frame deep, each image bracketed by its start and end tokens.

    The image processor resizes each image to a multiple of ``patch_size *
    merge_size`` within ``pixels``: the checks' 40 x 48 image is resized to
    32 x 48, a 4 x 6 grid of 8-pixel patches, merged 2 x 2 into 6 image
    tokens, and the prompt's image token becomes the image's start token,
    those 6 tokens and its end token. The video processor needs torchvision.
    """

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the Ovis2.5 processor: ``tokenizer`` naming its image tokens, image and video processors sized to the tower."""
        from transformers.models.ovis2_5.image_processing_pil_ovis2_5 import Ovis2_5ImageProcessorPil
        from transformers.models.ovis2_5.processing_ovis2_5 import Ovis2_5Processor
        from transformers.models.ovis2_5.video_processing_ovis2_5 import Ovis2_5VideoProcessor  # needs torchvision

        tokenizer = with_named_tokens(tokenizer, directory, OVIS2_5_TOKENS)
        fields = {OVIS2_5_TOKENS[name]: field for name, field in OVIS2_5_TOKEN_FIELDS.items()}
        check_token_ids(self.model_type, tokenizer, config, fields)
        vision = config.vision_config
        fewest, most = self.pixels
        sizes = {
            "patch_size": vision.patch_size,
            "temporal_patch_size": vision.temporal_patch_size,
            "merge_size": vision.spatial_merge_size,
        }
        images = Ovis2_5ImageProcessorPil(size={"shortest_edge": fewest, "longest_edge": most}, **sizes)
        videos = Ovis2_5VideoProcessor(**sizes)
        Ovis2_5Processor(image_processor=images, tokenizer=tokenizer, video_processor=videos).save_pretrained(directory)


#: a tower of two blocks, the first in 32-pixel windows (2 x 2 merge blocks), on a 4 x 4 learned position grid; a
#: visual vocabulary of 32 words and the 4 indicators
OVIS2_5_VIT = {
    **TOWER,
    "spatial_merge_size": 2,
    "window_size": 32,
    "layer_types": ["window_attention", "full_attention"],
    "vocab_size": 36,
    "num_visual_indicator_tokens": 4,
}
#: the tokens follow the tokenizer's 300 entries
TINY = Ovis2TinyConfig(
    "ovis2_5",
    {
        "text_config": {**TEXT, "model_type": "qwen3"},
        "vision_config": OVIS2_5_VIT,
        **{field: 300 + index for index, field in enumerate(OVIS2_5_TOKEN_FIELDS.values())},
    },
    load={"attn_implementation": "eager"},
)
