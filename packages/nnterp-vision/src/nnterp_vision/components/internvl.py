"""InternViT (InternVL's tower): layer-scaled blocks, sizes given as (height, width), a projection scattered unflattened."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from .blocks import VisionAttention, VisionMlp
from .projector import Projector, Selected, hidden_state
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


class InternVLProjector(Projector):
    """InternVL's projector: it takes the selected stream pixel-shuffled, ``[crops, tokens, vision_hidden_size / downsample_ratio ** 2]``.

    ``vision_feature_layer`` -1 selects the tower's ``last_hidden_state``
    (``tower_output``), any other index its ``hidden_states``; "default"
    drops the class row; the wrapper's ``pixel_shuffle`` then folds each
    ``1 / downsample_ratio`` square of patches into one row.
    """

    def selection(self) -> tuple[Selected, ...]:
        """``tower_output`` for ``vision_feature_layer`` -1, else that hidden state; the class row dropped under "default"."""
        config = self.root._module.config
        layer = config.vision_feature_layer
        drop = 1 if config.vision_feature_select_strategy == "default" else 0
        return (Selected(Vision.tower_output.name if layer == -1 else hidden_state(self.root.vision, layer), drop),)

    def laid_out(self, selected: Tensor) -> Tensor:
        """The selected rows on their square grid, through the wrapper's own ``pixel_shuffle``, one row per image token."""
        crops, rows, width = selected.shape
        side = int(rows**0.5)
        wrapper = self.root._module.model
        shuffled = wrapper.pixel_shuffle(
            selected.reshape(crops, side, side, width), scale_factor=wrapper.config.downsample_ratio
        )
        return shuffled.reshape(crops, -1, shuffled.shape[-1])
