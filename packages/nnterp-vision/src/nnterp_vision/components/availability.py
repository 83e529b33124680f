"""Whether an image reaches the model: the one place every image value asks."""

from __future__ import annotations

from typing import Any

from nnsight.intervention.interleaver import Mediator

from ..reasons import NO_IMAGE, NO_PROCESSOR, NO_PROJECTOR

#: the invoke keywords that carry an image, in the processor's terms or the model's
IMAGE_KEYS = ("images", "image", "pixel_values")


def no_images(envoy: Any) -> str | None:
    """Why no image reaches the model ``envoy`` belongs to, or None.

    Outside a trace this is a fact about the load (no projector named, no
    processor); inside one, also about the trace: a batch no invoke of which
    carries an image runs no tower. nnsight runs an image invoke alone, so the
    batch's images are this invoke's.
    """
    root = envoy.root
    if "projector" not in root.__dict__:
        return NO_PROJECTOR
    if getattr(root, "processor", None) is None:
        return NO_PROCESSOR
    try:
        mediator = Mediator.current("image values")
    except ValueError:
        return None  # outside a trace: the load serves images
    batcher = getattr(mediator.interleaver, "batcher", None)
    invokes = getattr(batcher, "invokes", None)
    if invokes is None or any(_has_image(inputs, kwargs) for inputs, kwargs in invokes):
        return None
    return NO_IMAGE


def _has_image(inputs: tuple, kwargs: dict) -> bool:
    if any(kwargs.get(key) is not None for key in IMAGE_KEYS):
        return True
    first = inputs[0] if inputs else None
    return first is not None and hasattr(first, "get") and first.get("pixel_values") is not None


def or_no_images(reason: Any) -> Any:
    """``no_images`` first, then ``reason`` (a string, a function of the envoy, or None)."""

    def combined(envoy: Any) -> str | None:
        found = no_images(envoy)
        if found is not None:
            return found
        return reason(envoy) if callable(reason) else reason

    return combined
