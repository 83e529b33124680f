"""The GLM-4V ViT (GLM-4.1V, GLM-4.5V, GLM-4.6V): the Qwen ViT with a final norm, and a downsampling convolution before its merger."""

from __future__ import annotations

from typing import ClassVar

from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGE_TOKENS
from .availability import no_images
from .projector import Projector
from .qwen import QwenVision, packed
from .vision import Vision

#: what GLM-4V's merger takes: one row per image token, each a merge block the convolution folded, out_hidden_size wide
DownsampledInput = Float[Tensor, f"{IMAGE_TOKENS} projector_input_size"]
#: what it returns: one row per image token, every image's
GlmMergerOutput = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]


#: why GLM-4V's merger input is no tower stream as it is
DOWNSAMPLED = (
    "GLM-4V's merger takes the output of the tower's downsampling convolution (a strided convolution folding each "
    "spatial_merge_size square of the normed last stream into one row), not a stream of the tower"
)


class Glm4vVision(QwenVision):
    """The GLM-4V ViT, at ``model.vision``: ``QwenVision`` (packed, per-image attention) with a final norm and a conv downsample.

    The tower embeds each patch (``patch_embeddings``, the 3D convolution's
    output), norms it (``post_conv_layernorm``), adds learned position
    embeddings resampled to each image's grid, runs its blocks over
    ``[patches, vision_hidden_size]``, and norms the last stream
    (``post_layernorm``): ``tower_output`` is that norm's output viewed
    ``[1, patches, vision_hidden_size]``, in merge-block order. A strided
    convolution (``downsample``) then folds each ``spatial_merge_size``
    square into one row ``out_hidden_size`` wide, and the merger
    (``model.projector``) maps those rows to the text model's width: the
    tower's own ``last_hidden_state`` is the convolution's output, not a
    stream, so it is not ``tower_output``.

    The blocks' MLP is gated and ``out_hidden_size`` wide (the config's
    ``intermediate_size`` is the merger's), so that is ``intermediate_size``.
    """

    tower_output = packed(Vision.tower_output.at("post_layernorm.output", select=None))

    @property
    def intermediate_size(self) -> int:
        """Width of the blocks' MLP: the config's ``out_hidden_size`` (its ``intermediate_size`` is the merger's)."""
        return int(self._config.out_hidden_size)


class Glm4vMerger(Projector):
    """GLM-4V's merger (``model.visual.merger``, as ``model.projector``): a linear, a norm and GELU, then a gated MLP.

    It takes the downsampling convolution's output, one row per image token
    (``[image_tokens, out_hidden_size]``, every image's in order), and
    returns ``[image_tokens, hidden_size]``: what the wrapper scatters, so
    ``projector_output == vision.image_features``. It runs inside the tower,
    after its final norm, so its values are read after ``vision.tower_output``.
    """

    no_selection: ClassVar[str | None] = DOWNSAMPLED

    @EProperty("input", "What the merger is called with: the downsampled tower output", no_images)
    def projector_input(self, value: Tensor) -> DownsampledInput:
        """The convolution's output, ``[image_tokens, out_hidden_size]``: one row per merge block. Assign to replace it."""
        return value

    @EProperty("output", "What the merger returns", no_images)
    def projector_output(self, value: Tensor) -> GlmMergerOutput:
        """The projected features, ``[image_tokens, hidden_size]``, in the tower's order."""
        return value

    @property
    def projector_input_size(self) -> int:
        """Width of the merger's input: its first linear's (``out_hidden_size``)."""
        return int(self._module.proj.in_features)
