"""The projector: the adapter from the tower's width to the text model's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from nnterp.components import Standard
from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGE_TOKENS, IMAGES, PATCHES
from .availability import no_images
from .vision import Vision

#: what the projector takes: the host's selection of the tower's stream (its layers concatenated, CLS dropped ...)
ProjectorInput = Float[Tensor, f"{IMAGES} {PATCHES} projector_input_size"]
ProjectorOutput = Float[Tensor, f"{IMAGES} {PATCHES} {HIDDEN}"]
#: a flat projector's input and output: one row per image token, every image's in order
FlatProjectorInput = Float[Tensor, f"{IMAGE_TOKENS} projector_input_size"]
FlatProjectorOutput = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]


@dataclass(frozen=True)
class Selected:
    """One tower value the projector's input is made of: ``model.vision.<value>`` (a dotted path), its first ``drop`` rows dropped."""

    value: str
    #: the leading rows the wrapper drops (1: the class row, under vision_feature_select_strategy="default")
    drop: int = 0


def hidden_state(vision: Any, index: int) -> str:
    """The tower value that is ``hidden_states[index]`` of the tower's output: block 0's ``layer_input`` for 0, else block
    ``index - 1``'s ``layer_output`` (negative counts from the end, ``-1`` the last block's), before any final norm."""
    count = vision.num_layers
    index = index % (count + 1)
    return "layers.0.layer_input" if index == 0 else f"layers.{index - 1}.layer_output"


#: why a flat projector's input is no tower stream as it is
FLAT_INPUT = (
    "a flat projector takes what the tower's own merger returns after its last block, one row per image token "
    "(HyperCLOVA X's Qwen merger)"
)
#: why an adapted projector's input is no tower stream as it is
ADAPTED_INPUT = (
    "the projector takes what the tower's own adapter returns after its last block, per image (Llama 4's "
    "vision_adapter: a pixel shuffle and an MLP)"
)


class Projector(Standard):
    """A wrapper's projector: what it is called with and what it returns, before the wrapper scatters it into the tokens."""

    #: why ``projector_input`` is no tower value as it is (the tower's own adapter or merger makes it), which
    #: ``selection`` says; None (here) where the wrapper selects tower values. Set by such a projector class
    #: (``AdaptedProjector``, ``FlatProjector``, GLM-4V's and Kimi-K2.5's)
    no_selection: ClassVar[str | None] = None

    def selection(self) -> tuple[Selected, ...] | str:
        """The tower values ``projector_input`` is, side by side along the width; or why it is none as it is (``no_selection``).

        The wrapper config's ``vision_feature_layer`` (an index of the tower's
        ``hidden_states``, or a list of them concatenated) with its
        ``vision_feature_select_strategy`` ("default" drops the class row,
        "full" keeps it), as LLaVA and its kin select; a wrapper whose config
        names no layer hands on the tower's ``last_hidden_state``
        (``tower_output``). The kit's ``projector_reads_the_selected_stream``
        holds ``projector_input`` equal to it; a family whose wrapper selects
        otherwise overrides this.
        """
        if self.no_selection is not None:
            return self.no_selection
        config = self.root._module.config
        layers = getattr(config, "vision_feature_layer", None)
        if layers is None:
            return (Selected(Vision.tower_output.name),)
        drop = 1 if getattr(config, "vision_feature_select_strategy", None) == "default" else 0
        layers = [layers] if isinstance(layers, int) else list(layers)
        return tuple(Selected(hidden_state(self.root.vision, layer), drop) for layer in layers)

    def laid_out(self, selected: Tensor) -> Tensor:
        """``selected`` (the ``selection``, side by side) as the wrapper hands it to the projector: itself, where the
        wrapper reshapes nothing between; a family whose wrapper does (InternVL's pixel shuffle) calls the wrapper's own code."""
        return selected

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


class AdaptedProjector(Projector):
    """A projector called per image on what the tower's own adapter returns, ``[images, image tokens, width]``
    (Llama 4's linear: the wrapper flattens its output before the scatter)."""

    no_selection = ADAPTED_INPUT


class FlatProjector(Projector):
    """A projector called on every image's tokens flat, one row per image token (HyperCLOVA X's after the Qwen merger)."""

    no_selection = FLAT_INPUT

    @EProperty("input", "What the projector is called with", no_images)
    def projector_input(self, value: Tensor) -> FlatProjectorInput:
        """The tower's output, flat, ``[image_tokens, projector_input_size]``. Assign to replace it."""
        return value

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> FlatProjectorOutput:
        """The projected features, ``[image_tokens, hidden_size]``: what the wrapper scatters (after a cast)."""
        return value
