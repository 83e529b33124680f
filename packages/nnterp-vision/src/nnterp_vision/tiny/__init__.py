"""Tiny vision-language checkpoints: the wrapper's config, its model class, and a processor sized to its tower.

``VisionTinyConfig`` is LLaVA's; a family whose processor differs has its own
subclass in a module here named after it (``tiny.qwen2_vl``, ``tiny.gemma3`` ...).

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from nnterp.tiny import TinyConfig

#: the placeholder the processor expands into one token per image feature
IMAGE_TOKEN = "<image>"
#: the placeholder of a video, the token after the image's
VIDEO_TOKEN = "<video>"
#: the image token and the config field naming its id; then with the video token's
IMAGE_TOKEN_FIELD = {IMAGE_TOKEN: "image_token_id"}
IMAGE_VIDEO_FIELDS = {**IMAGE_TOKEN_FIELD, VIDEO_TOKEN: "video_token_id"}


def check_token_ids(model_type: str, tokenizer: Any, config: Any, tokens: dict[str, str]) -> None:
    """Check that each of ``tokens`` has, in ``tokenizer``, the id its config field names.

    ``tokens`` maps a token to that field (``{"<image>": "image_token_id"}``);
    a mismatch is a ValueError naming ``model_type``.
    """
    for token, name in tokens.items():
        found = tokenizer.convert_tokens_to_ids(token)
        if found != getattr(config, name):
            raise ValueError(f"{model_type}: {token} is id {found}; the config's {name} is {getattr(config, name)}")


def add_tokens(model_type: str, tokenizer: Any, config: Any, tokens: dict[str, str]) -> None:
    """Give ``tokenizer`` the special ``tokens`` in order, checking each id against its config field."""
    tokenizer.add_tokens(list(tokens), special_tokens=True)
    check_token_ids(model_type, tokenizer, config, tokens)


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

    #: the processor's ``vision_feature_select_strategy``; None: the config's (VipLLaVA's config names none)
    select_strategy: str | None = None
    #: the processor's class in ``transformers``, which takes LLaVA's arguments (LLaVA-NeXT's)
    processor_class: ClassVar[str] = "LlavaProcessor"

    def build(self, config: Any) -> Any:
        """The model, from ``config``, with this checkpoint's load arguments."""
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText.from_config(config, **self.load)

    def image_processor(self, config: Any) -> Any:
        """A CLIP image processor resizing and cropping every image to the tower's ``image_size``."""
        from transformers import CLIPImageProcessor

        side = config.vision_config.image_size
        return CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side})

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save the LLaVA processor: ``tokenizer`` with the image token, and ``image_processor``."""
        import transformers

        add_tokens(self.model_type, tokenizer, config, IMAGE_TOKEN_FIELD)
        processor = getattr(transformers, self.processor_class)(
            image_processor=self.image_processor(config),
            tokenizer=tokenizer,
            patch_size=config.vision_config.patch_size,
            vision_feature_select_strategy=self.select_strategy or config.vision_feature_select_strategy,
            num_additional_image_tokens=1,  # CLIP's class row
            image_token=IMAGE_TOKEN,
        )
        processor.save_pretrained(directory)
