"""A projector that pixel-shuffles the tower's patch grid before its SwiGLU (Aya Vision, Command A Vision)."""

from __future__ import annotations

from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGES
from .availability import no_images
from .projector import Projector

#: the rows and columns of a crop's image tokens: its patch grid's over the downsample factor
TOKEN_ROWS, TOKEN_COLUMNS = "token_rows", "token_columns"
#: what the projector returns: each crop's image tokens still on their grid
ShuffledFeatures = Float[Tensor, f"{IMAGES} {TOKEN_ROWS} {TOKEN_COLUMNS} {HIDDEN}"]


class PixelShuffleProjector(Projector):
    """Fold each ``downsample_factor`` square of patches into one row (the pixel shuffle), then a SwiGLU of two linears.

    It takes one stream of the tower, ``[crops, patches, vision_hidden_size]``
    (a square grid of patches per crop), and returns the crops' image tokens
    still on their grid, ``[crops, rows, columns, hidden_size]`` with
    ``rows = columns = sqrt(patches) // downsample_factor``; the wrapper
    flattens them crop after crop, in raster order, into ``vision.image_features``.
    """

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> ShuffledFeatures:
        """The shuffled, projected features, ``[crops, rows, columns, hidden_size]``, before the wrapper flattens them."""
        return value

    @property
    def downsample_factor(self) -> int:
        """Side of the square of patches the shuffle folds into one image token."""
        return int(self._module.downsample_factor)

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input: the tower's (its first linear takes ``downsample_factor ** 2`` times that, after the shuffle)."""
        return int(self._module.linear_1.in_features // self.downsample_factor**2)
