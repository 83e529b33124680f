"""GLM-OCR's ViT: GLM-4V's without learned positions, its blocks' MLP as wide as the config's intermediate_size."""

from __future__ import annotations

from .glm4v import Glm4vVision


class GlmOcrVision(Glm4vVision):
    """GLM-OCR's tower (``model.vision``): ``Glm4vVision`` whose blocks' gated MLP is ``intermediate_size`` wide.

    GLM-4V's blocks' MLP is ``out_hidden_size`` wide; GLM-OCR's takes the
    config's ``intermediate_size`` (the merger's is ``out_hidden_size *
    in_channels``). The tower also drops GLM-4V's ``post_conv_layernorm`` and
    learned position embeddings (2D rotary positions only), which no value reads.
    """

    @property
    def intermediate_size(self) -> int:
        """Width of the blocks' MLP: the config's ``intermediate_size``."""
        return int(self._config.intermediate_size)
