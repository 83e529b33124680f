"""FastVLM's tiny checkpoint: a FastViT-MCi3 tower (timm, built from its name, shrunk), a Qwen2 text model, and the LLaVA processor.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import IMAGE_TOKEN, IMAGE_TOKEN_FIELD, VisionTinyConfig, add_tokens
from .sizes import QWEN2_SIZED

#: FastViT-MCi3 (FastVLM's tower) shrunk: one block per stage (three RepMixer stages, two attention stages), a total
#: stride of 64, so a 128-pixel image is a 2 x 2 feature map of final_conv's 64 channels (twice the last stage's 32)
FASTVIT = {
    "model_type": "timm_wrapper",
    "architecture": "fastvit_mci3",
    "do_pooling": True,
    "hidden_size": 64,
    "model_args": {
        "inference_mode": True,
        "layers": [1, 1, 1, 1, 1],
        "embed_dims": [8, 16, 16, 32, 32],
        "mlp_ratios": [2, 2, 2, 2, 2],
    },
}
#: the side every image is resized and cropped to
SIDE = 128
#: loaded dispatched: timm builds its tower with value-dependent ops (drop-path rates read with .item()), which
#: nnsight's meta build cannot run
LOAD = {"attn_implementation": "eager", "dispatch": True}


@dataclass(frozen=True)
class FastVlmTinyConfig(VisionTinyConfig):
    """FastVLM's processor, LLaVA's: every image resized and cropped to ``SIDE``, one image token per position of the tower's last map."""

    def build(self, config: Any) -> Any:
        """The model, from ``config`` (``load`` without ``dispatch``), its tower's convolutions drawn to keep the image's signal.

        At these widths torch's default convolution init shrinks the map about
        tenfold per stage, so the tiny tower's output would not depend on the
        image at float precision; He-normal weights keep it at unit scale.
        """
        import torch
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_config(
            config, **{key: value for key, value in self.load.items() if key != "dispatch"}
        )
        with torch.no_grad():
            for module in model.model.vision_tower.modules():
                if isinstance(module, torch.nn.Conv2d):
                    torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        return model

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LLaVA processor: ``tokenizer`` with the image token, a CLIP image processor to ``SIDE``, a patch of the tower's stride."""
        from transformers import CLIPImageProcessor, LlavaProcessor

        add_tokens(self.model_type, tokenizer, config, IMAGE_TOKEN_FIELD)
        images = CLIPImageProcessor(size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE})
        processor = LlavaProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=64,
            vision_feature_select_strategy="full",
            num_additional_image_tokens=0,
            image_token=IMAGE_TOKEN,
        )
        processor.save_pretrained(directory)


#: the image token follows the tokenizer's 300 entries; 4 image tokens per image (a 2 x 2 map)
TINY = FastVlmTinyConfig(
    "fast_vlm",
    {"text_config": QWEN2_SIZED, "vision_config": FASTVIT, "image_token_id": 300, "image_seq_length": 4},
    load=LOAD,
)
