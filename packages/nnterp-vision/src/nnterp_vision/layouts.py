"""The shapes of a vision tower's values and of where the image meets the text."""

from __future__ import annotations

from nnterp.layouts import BATCH, HIDDEN, SEQ, declare

from jaxtyping import Bool, Float
from torch import Tensor

#: the images of the call, one row each
IMAGES = "images"
#: the tower's positions: one per patch (CLIP adds a class token in front)
PATCHES = "patches"
#: the tower's width, a size apart from the text model's hidden_size
VISION_HIDDEN = "vision_hidden_size"
#: every image token of the batch, in the order the text model holds them
IMAGE_TOKENS = "image_tokens"

#: the tower's stream and what its sublayers add to it
Patches = Float[Tensor, f"{IMAGES} {PATCHES} {VISION_HIDDEN}"]
#: which tokens of the prompt are image placeholders
ImageTokenMask = Bool[Tensor, f"{BATCH} {SEQ}"]
#: the rows the text model receives at the image tokens, one per image token
ImageFeatures = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]

declare(dict(globals()))
