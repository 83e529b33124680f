"""InternViT (InternVL's tower): layer-scaled blocks, sizes given as (height, width), a projection scattered unflattened."""

from __future__ import annotations

from typing import Any

from .blocks import VisionAttention, VisionMlp
from .vision import Vision


def _lambda_1(envoy: Any) -> Any:
    return envoy.parent._module.lambda_1


def _lambda_2(envoy: Any) -> Any:
    return envoy.parent._module.lambda_2


class LayerScaledAttention(VisionAttention):
    """An InternViT block's attention: the block adds ``lambda_1 * attention(...)``, so that product is ``attention_output``.

    ``lambda_1`` is a learned ``[vision_hidden_size]`` vector (the block's
    layer scale); a written contribution is divided by it before it reaches
    the model. The interior (queries ... head outputs) is the module's own, unscaled.
    """

    attention_output = VisionAttention.attention_output.scaled(_lambda_1)


class LayerScaledMlp(VisionMlp):
    """An InternViT block's MLP: the block adds ``lambda_2 * mlp(...)``, so that product is ``mlp_output``."""

    mlp_output = VisionMlp.mlp_output.scaled(_lambda_2)


class InternVision(Vision):
    """InternViT: a class row first, layer-scaled pre-norm blocks, no final norm where it mean-pools (``layernorm`` an identity).

    ``patch_embeddings`` is the convolution's output one row per patch (no
    class row); the blocks' values carry the class row first,
    ``[crops, 1 + patches, vision_hidden_size]``. The config gives
    ``image_size`` and ``patch_size`` as (height, width); the tower is
    square, so they are one side each. InternVL hands ``masked_scatter`` the
    projection unflattened; ``image_features`` serves it flattened, as on every tower.
    """

    @property
    def patch_size(self) -> int:
        """Side of one patch, in pixels."""
        return int(self._config.patch_size[0])

    @property
    def image_size(self) -> int:
        """Side of the square crop the tower is configured for, in pixels."""
        return int(self._config.image_size[0])
