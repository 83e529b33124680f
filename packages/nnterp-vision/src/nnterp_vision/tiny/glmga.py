"""The tiny checkpoint of GLMGA: GLM-4.6V's, with the type's own image and video processors.

Light on purpose, like ``tiny``: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .glm4v import GLM4V_TEXT_SIZED, GLM4V_VIT, GLM_TOKEN_IDS, Glm4vTinyConfig


@dataclass(frozen=True)
class GlmgaTinyConfig(Glm4vTinyConfig):
    """GLM-4.6V's tiny processor with GLMGA's image and video processors in place of GLM-4.6V's, sized alike."""

    processor: tuple[str, str] = ("glm46v", "Glm46V")

    def save_preprocessors(self, directory: Path, tokenizer: Any, config: Any) -> None:
        """Save GLM-4.6V's processor, then again with the Glmga image and video processors on its sizes."""
        from transformers.models.glm46v.processing_glm46v import Glm46VProcessor
        from transformers.models.glmga.image_processing_pil_glmga import GlmgaImageProcessorPil
        from transformers.models.glmga.video_processing_glmga import GlmgaVideoProcessor

        super().save_preprocessors(directory, tokenizer, config)
        saved = Glm46VProcessor.from_pretrained(directory)
        images = saved.image_processor
        sizes = {
            "patch_size": images.patch_size,
            "temporal_patch_size": images.temporal_patch_size,
            "merge_size": images.merge_size,
        }
        Glm46VProcessor(
            image_processor=GlmgaImageProcessorPil(size=dict(images.size), **sizes),
            tokenizer=saved.tokenizer,
            video_processor=GlmgaVideoProcessor(**sizes),
        ).save_pretrained(directory)


#: GLM-4.6V's tiny checkpoint under the GLMGA type: GLM-4.1V's tower and text model; the checks' image is 6 image tokens
TINY = GlmgaTinyConfig(
    "glmga",
    {"text_config": GLM4V_TEXT_SIZED, "vision_config": {"model_type": "glm4v_vision", **GLM4V_VIT}, **GLM_TOKEN_IDS},
)
