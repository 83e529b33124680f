"""VipLLaVA's tiny checkpoint: LLaVA's processor, with the class row dropped though the config names no strategy.

Light on purpose: transformers is imported only when a checkpoint is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import VisionTinyConfig


@dataclass(frozen=True)
class VipLlavaTinyConfig(VisionTinyConfig):
    """A VipLLaVA checkpoint, saved with a ``LlavaProcessor``.

    ``VipLlavaConfig`` has no ``vision_feature_select_strategy``: the model
    always drops CLIP's class row from every selected layer, which is the
    processor's ``"default"`` strategy.
    """

    select_strategy: str | None = "default"
