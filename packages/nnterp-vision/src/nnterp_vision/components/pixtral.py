"""Pixtral's tower (Mistral 3, LLaVA on a Pixtral tower): packed, every image's patches in one row."""

from __future__ import annotations

from nnterp.descriptors import EProperty
from nnterp.errors import Unavailable
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGE_TOKENS, PATCHES, Patches
from .availability import no_images
from .projector import Projector
from .vision import Vision

#: why a Pixtral tower has no image_size
VARIABLE_RESOLUTION = (
    "the tower takes any resolution: the config's image_size is the longest side the processor resizes to, "
    "not one size every image has; the processor's image_sizes give each image's"
)


class PixtralVision(Vision):
    """Pixtral's tower (Mistral 3, Llava-Pixtral): packed, every image's patches in one row.

    The convolution runs on the batch padded to its largest image, each image
    is cropped to its own grid, and the grids are flattened and concatenated
    into ``[1, all patches, vision_hidden_size]`` before ``ln_pre``; the blocks
    attend under a block-diagonal mask, so no patch sees another image's. So
    ``Patches`` has a leading 1 here, and ``patch_embeddings`` is that packed
    row as it enters ``ln_pre`` (the convolution's own output,
    ``patch_embed.output``, is still the padded grid). The processor's
    ``image_sizes`` split the row per image: ``(height // patch_size) *
    (width // patch_size)`` patches each, in order. The attention interior is
    whole: one interface call over the packed row, so
    ``attention_probabilities`` is ``[1, heads, all patches, all patches]``,
    zero between images. The tower has no final norm: ``tower_output`` is the
    last block's stream. ``image_size`` is Unavailable: the config's is the
    largest side the processor resizes to, not one size every image has.
    """

    @EProperty("ln_pre.input", "Every image's patch embeddings, packed in one row, as they enter ln_pre", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """Every image's patch embeddings, ``[1, all patches, vision_hidden_size]``, image after image, each in raster order.

        What enters ``ln_pre``: the convolution's output cropped per image and
        concatenated. Assign a tensor of the same shape to replace it.
        """
        return value

    @property
    def image_size(self) -> int:
        """Unavailable: the tower takes any resolution (``VARIABLE_RESOLUTION``)."""
        raise Unavailable(self, "image_size", VARIABLE_RESOLUTION)


#: what Mistral 3's projector takes: the packed row without its leading 1
PackedProjectorInput = Float[Tensor, f"{PATCHES} projector_input_size"]
#: what it returns: one row per image token, the patches merged
PackedProjectorOutput = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]


class PatchMergerProjector(Projector):
    """Mistral 3's projector: a norm, the patch merger (each ``spatial_merge_size`` square of patches into one row), two linears.

    It takes the packed row squeezed, ``[all patches, vision_hidden_size]``
    (with ``image_sizes``), and returns one row per image token,
    ``[image_tokens, hidden_size]``, every image's in order: what the wrapper
    scatters, unchanged, so ``projector_output == vision.image_features``.
    """

    @EProperty("input", "What the projector is called with", no_images)
    def projector_input(self, value: Tensor) -> PackedProjectorInput:
        """The selected tower stream, packed, ``[all patches, projector_input_size]``. Assign to replace it."""
        return value

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> PackedProjectorOutput:
        """The merged, projected features, ``[image_tokens, hidden_size]``, image after image."""
        return value

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input: its first linear layer's (the patch merger's widens it, after the norm)."""
        return int(self._module.linear_1.in_features)


#: what LLaVA's projector takes on a Pixtral tower: the packed row, its leading 1 kept
PackedPatches = Float[Tensor, f"1 {PATCHES} projector_input_size"]
#: what it returns: one row per patch, which is one image token
PackedFeatures = Float[Tensor, f"1 {IMAGE_TOKENS} {HIDDEN}"]


class PackedProjector(Projector):
    """LLaVA's projector on a Pixtral tower: two linears over the packed row, one output row per patch.

    It takes the selected tower stream as the tower returns it, ``[1, all
    patches, projector_input_size]``, and returns ``[1, image_tokens,
    hidden_size]``: ``LlavaModel`` splits the rows per image (by the
    processor's ``image_sizes``) and scatters them in order, so
    ``projector_output[0] == vision.image_features``.
    """

    @EProperty("input", "What the projector is called with", no_images)
    def projector_input(self, value: Tensor) -> PackedPatches:
        """The selected tower stream, packed, ``[1, all patches, projector_input_size]``. Assign to replace it."""
        return value

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> PackedFeatures:
        """The projected features, ``[1, image_tokens, hidden_size]``, image after image."""
        return value
