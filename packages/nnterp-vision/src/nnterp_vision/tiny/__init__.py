"""Tiny vision-language checkpoints: the wrapper's config, its model class, and a processor sized to its tower.

``VisionTinyConfig`` is LLaVA's; a family whose processor differs has its own
subclass in a module here named after it (``tiny.qwen2_vl``, ``tiny.gemma3`` ...).

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnterp.tiny import TinyConfig

#: the placeholder the processor expands into one token per image feature
IMAGE_TOKEN = "<image>"


def with_named_tokens(tokenizer: Any, directory: Path, names: dict[str, str]) -> Any:
    """``tokenizer`` with its special tokens ``names`` added and named (``tokenizer.image_token`` ...), as processors read them.

    A name is given at load only (``extra_special_tokens``), so the tokenizer
    is saved into ``directory`` and loaded back.
    """
    tokenizer.add_special_tokens({"additional_special_tokens": list(names.values())})
    tokenizer.save_pretrained(directory)
    return type(tokenizer).from_pretrained(directory, extra_special_tokens=names)


@dataclass(frozen=True)
class VisionTinyConfig(TinyConfig):
    """A ``TinyConfig`` for a wrapper: built through ``AutoModelForImageTextToText``, saved with a processor.

    The checkpoint writer calls ``build`` for the model and
    ``save_preprocessors`` after the tokenizer: the tokenizer gains the image
    token (its id must be the config's ``image_token_id``) and a CLIP image
    processor resizes and crops every image to the tower's ``image_size``.
    """

    def build(self, config: Any) -> Any:
        """The model, from ``config``, with this checkpoint's load arguments."""
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText.from_config(config, **self.load)

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LLaVA processor: ``tokenizer`` with the image token, and an image processor sized to the tower."""
        from transformers import CLIPImageProcessor, LlavaProcessor

        tokenizer.add_tokens([IMAGE_TOKEN], special_tokens=True)
        token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if token != config.image_token_id:
            raise ValueError(
                f"{self.model_type}: the image token is id {token}; the config says {config.image_token_id}"
            )
        vision = config.vision_config
        side = vision.image_size
        images = CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
        processor = LlavaProcessor(
            image_processor=images,
            tokenizer=tokenizer,
            patch_size=vision.patch_size,
            vision_feature_select_strategy=config.vision_feature_select_strategy,
            num_additional_image_tokens=1,  # CLIP's class row
            image_token=IMAGE_TOKEN,
        )
        processor.save_pretrained(directory)
