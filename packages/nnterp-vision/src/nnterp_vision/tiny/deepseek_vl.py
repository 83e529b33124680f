"""DeepSeek-VL's tiny checkpoint: a SigLIP tower, a Llama text model, and the DeepSeek-VL processor sized to the tower.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from . import IMAGE_TOKEN, IMAGE_TOKEN_FIELD, VisionTinyConfig, check_token_ids, with_named_tokens
from .sizes import SIGLIP, TEXT


@dataclass(frozen=True)
class DeepseekVLTinyConfig(VisionTinyConfig):
    """DeepSeek-VL's processor: each image placeholder becomes ``num_image_tokens`` image tokens, one per patch.

    The image processor resizes the longer side to the tower's ``image_size``
    and pads the other to a square; the processor reads its placeholder off
    the tokenizer's ``image_token``.
    """

    #: the tokens the processor reads off the tokenizer, by attribute name (the image token first)
    named_tokens: ClassVar[dict[str, str]] = {"image_token": IMAGE_TOKEN}
    #: the name prefix of the processor and image processor classes in ``transformers`` (Janus's take the same)
    prefix: ClassVar[str] = "DeepseekVL"

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the processor: ``tokenizer`` with its image tokens named, and an image processor sized to the tower."""
        import transformers

        # reloaded to name them: the processor reads tokenizer.image_token (Janus's boi_token and eoi_token too)
        tokenizer = with_named_tokens(tokenizer, directory, self.named_tokens)
        check_token_ids(self.model_type, tokenizer, config, IMAGE_TOKEN_FIELD)
        vision = config.vision_config
        side = vision.image_size
        images = getattr(transformers, f"{self.prefix}ImageProcessor")(size={"height": side, "width": side})
        processor = getattr(transformers, f"{self.prefix}Processor")(
            image_processor=images, tokenizer=tokenizer, num_image_tokens=(side // vision.patch_size) ** 2
        )
        processor.save_pretrained(directory)


#: nested configs declared through AutoConfig are not shrunk: both given whole; 16 image tokens per image
TINY = DeepseekVLTinyConfig(
    "deepseek_vl",
    {"text_config": TEXT, "vision_config": SIGLIP, "image_token_id": 300},
    load={"attn_implementation": "eager"},
)
