"""PerceptionLM's tiny checkpoint: a Perception Encoder tower (timm, built from its name), a Llama text model, and its processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import VisionTinyConfig
from .sizes import TEXT

#: the processor's placeholders, after the tokenizer's 300 entries
IMAGE, VIDEO = "<|image|>", "<|video|>"
#: PE-Core's architecture shrunk: 32-pixel tiles in 8-pixel patches (4 x 4 and a class row), rotary on a 4 x 4 grid,
#: a layer scale after each sublayer (PE-Lang's), no final norm and no pooling head (the checkpoint's own settings)
PE = {
    "model_type": "timm_wrapper",
    "architecture": "vit_pe_core_large_patch14_336",
    "do_pooling": False,
    "model_args": {
        "embed_dim": 64,
        "depth": 2,
        "num_heads": 4,
        "mlp_ratio": 2.0,
        "patch_size": 8,
        "img_size": [32, 32],
        "ref_feat_shape": [4, 4],
        "class_token": True,
        "init_values": 0.1,
        "global_pool": "",
        "use_post_transformer_norm": False,
    },
}


@dataclass(frozen=True)
class PerceptionLMTinyConfig(VisionTinyConfig):
    """PerceptionLM's processor: each image a thumbnail and one tile (``max_num_tiles=1``), every tile ``tokens_per_tile`` image tokens.

    More tiles would be the real checkpoint's way, but the processor cannot
    stack images cut into different numbers of tiles into one batch; one tile
    keeps every image at two rows of the tower.
    """

    def build(self, config: Any) -> Any:
        """The model, from ``config``: ``load`` without ``dispatch`` (a load argument, not a model one)."""
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText.from_config(
            config, **{key: value for key, value in self.load.items() if key != "dispatch"}
        )

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the PerceptionLM processor: ``tokenizer`` with the image and video tokens, tiles of the tower's size."""
        from transformers import PerceptionLMImageProcessor, PerceptionLMProcessor, PerceptionLMVideoProcessor

        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE, VIDEO]})
        tokenizer.save_pretrained(directory)
        # reloaded to name them: the processor reads tokenizer.image_token and video_token (and their ids)
        tokenizer = type(tokenizer).from_pretrained(
            directory, extra_special_tokens={"image_token": IMAGE, "video_token": VIDEO}
        )
        ids = [tokenizer.image_token_id, tokenizer.video_token_id]
        if ids != [config.image_token_id, config.video_token_id]:
            raise ValueError(f"{self.model_type}: the image and video tokens are ids {ids}; the config says otherwise")
        args = config.vision_config.model_args
        side = args["img_size"][0]
        images = PerceptionLMImageProcessor(tile_size=side, max_num_tiles=1, size={"height": side, "width": side})
        processor = PerceptionLMProcessor(
            video_processor=PerceptionLMVideoProcessor(size={"height": side, "width": side}),
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=args["patch_size"],
            pooling_ratio=config.projector_pooling_ratio,
        )
        processor.save_pretrained(directory)


#: loaded dispatched: timm builds its tower with value-dependent ops (drop-path rates read with .item()), which
#: nnsight's meta build cannot run
LOAD = {"attn_implementation": "eager", "dispatch": True}
#: the checks' image: a thumbnail and one tile, 4 x 4 patches each pooled 2 x 2, so 8 image tokens per image
TINY = PerceptionLMTinyConfig(
    "perception_lm",
    {
        "text_config": TEXT,
        "vision_config": PE,
        "image_token_id": 300,
        "video_token_id": 301,
        "projector_pooling_ratio": 2,
    },
    load=LOAD,
)
