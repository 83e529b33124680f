"""Idefics3's (and SmolVLM's) wrapper: a pixel-shuffle connector, and the features written in by its own merge method."""

from __future__ import annotations

from typing import ClassVar

from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGES
from .availability import no_images
from .projector import Projector
from .scatter import ImageScatter

#: an image's tokens after the pixel shuffle: its patches over ``scale_factor ** 2``
IMAGE_TOKENS_PER_IMAGE = "image_tokens_per_image"

#: what the connector returns: one row per image token, image by image
ConnectorOutput = Float[Tensor, f"{IMAGES} {IMAGE_TOKENS_PER_IMAGE} {HIDDEN}"]


class MergerScatter(ImageScatter):
    """Idefics3's inner model (``Idefics3Model``, ``SmolVLMModel``): the features go in through ``self.inputs_merger``.

    ``forward`` concatenates the connector's output per image into
    ``image_hidden_states``, ``[image_tokens, hidden_size]``, and calls
    ``self.inputs_merger(input_ids=..., inputs_embeds=..., image_hidden_states=...)``,
    whose ``inputs_embeds.masked_scatter`` writes them in at the image
    tokens unchanged (a cast to the embeddings' dtype and device aside).
    ``image_features`` is that keyword argument: what the text model receives.
    """

    scatter_operation: ClassVar[str] = "self_inputs_merger_0"
    scatter_argument: ClassVar[int | str] = "image_hidden_states"


class ShuffleConnector(Projector):
    """Idefics3's connector: the pixel shuffle (each ``scale_factor`` square of patches into one row), then one linear.

    It takes the tower's ``last_hidden_state`` (``tower_output``),
    ``[images, patches, vision_hidden_size]``, and returns
    ``[images, patches // scale_factor ** 2, hidden_size]``; the wrapper
    flattens that image after image into ``image_features``.
    """

    @EProperty("output", "What the connector returns", no_images)
    def projector_output(self, value: Tensor) -> ConnectorOutput:
        """The shuffled, projected features, ``[images, image_tokens_per_image, hidden_size]``."""
        return value

    @property
    def projector_input_size(self) -> int:
        """Width of the connector's input: the tower's (its linear takes ``scale_factor ** 2`` times that, after the shuffle)."""
        return int(self._module.modality_projection.proj.in_features // self._module.scale_factor**2)

    @property
    def scale_factor(self) -> int:
        """Side of the square of patches the shuffle folds into one image token."""
        return int(self._module.scale_factor)
