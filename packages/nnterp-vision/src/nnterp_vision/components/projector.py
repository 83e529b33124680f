"""The projector: the adapter from the tower's width to the text model's."""

from __future__ import annotations

from jaxtyping import Float
from nnterp.components import Standard
from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN
from torch import Tensor

from ..layouts import IMAGE_TOKENS, IMAGES, PATCHES
from .availability import no_images

#: what the projector takes: the host's selection of the tower's stream (its layers concatenated, CLS dropped ...)
ProjectorInput = Float[Tensor, f"{IMAGES} {PATCHES} projector_input_size"]
ProjectorOutput = Float[Tensor, f"{IMAGES} {PATCHES} {HIDDEN}"]
#: a flat projector's input and output: one row per image token, every image's in order
FlatProjectorInput = Float[Tensor, f"{IMAGE_TOKENS} projector_input_size"]
FlatProjectorOutput = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]


class Projector(Standard):
    """A wrapper's projector: what it is called with and what it returns, before the wrapper scatters it into the tokens."""

    @EProperty("input", "What the projector is called with", no_images)
    def projector_input(self, value: Tensor) -> ProjectorInput:
        """The tower features the wrapper selected, ``[images, patches, projector_input_size]``.

        Not necessarily ``tower_output``: LLaVA takes ``vision.layers[-2].layer_output``
        without its CLS row. Assign to replace it.
        """
        return value

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> ProjectorOutput:
        """The projected features, ``[images, patches, hidden_size]``, before the wrapper reshapes or scatters them."""
        return value

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input: its first linear layer's."""
        return int(next(module for module in self._module.modules() if hasattr(module, "in_features")).in_features)


class FlatProjector(Projector):
    """A projector called on every image's tokens flat, one row per image token (Llama 4's linear, HyperCLOVA X's after the Qwen merger)."""

    @EProperty("input", "What the projector is called with", no_images)
    def projector_input(self, value: Tensor) -> FlatProjectorInput:
        """The tower's output, flat, ``[image_tokens, projector_input_size]``. Assign to replace it."""
        return value

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> FlatProjectorOutput:
        """The projected features, ``[image_tokens, hidden_size]``: what the wrapper scatters (after a cast)."""
        return value
