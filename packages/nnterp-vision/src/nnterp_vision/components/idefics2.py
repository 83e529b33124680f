"""Idefics2's connector: a gated MLP to the text width, then a perceiver resampler to a fixed number of latents per image."""

from __future__ import annotations

from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGES
from .availability import no_images
from .projector import Projector

#: the resampler's rows per image: its learned latents, ``resampler_n_latents``
LATENTS = "resampler_n_latents"

#: what the connector returns: one row per latent, image by image
PerceiverOutput = Float[Tensor, f"{IMAGES} {LATENTS} {HIDDEN}"]


class PerceiverConnector(Projector):
    """Idefics2's connector: ``modality_projection`` (a gated MLP, tower width to text width), then ``perceiver_resampler``.

    It takes the tower's ``last_hidden_state`` (``tower_output``),
    ``[images, patches, vision_hidden_size]``; the resampler's learned
    latents attend to those projected patches (and to themselves) through
    ``resampler_depth`` blocks, so it returns ``[images,
    resampler_n_latents, hidden_size]``, a fixed number of rows per image
    whatever the patch count. The wrapper flattens that image after image
    into ``image_features``.
    """

    @EProperty("output", "What the connector returns", no_images)
    def projector_output(self, value: Tensor) -> PerceiverOutput:
        """The resampled features, ``[images, resampler_n_latents, hidden_size]``, before the wrapper flattens them."""
        return value

    @property
    def projector_input_size(self) -> int:
        """Width of the connector's input: the tower's, what ``modality_projection`` takes."""
        return int(self._module.modality_projection.gate_proj.in_features)

    @property
    def resampler_n_latents(self) -> int:
        """Rows per image the resampler returns: its learned latents."""
        return int(self._module.perceiver_resampler.n_latents)
