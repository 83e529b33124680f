"""model.vision: a vision tower's root, its sizes, and where its image meets the text model."""

from __future__ import annotations

from typing import Any

from nnterp.components import Standard, blocks_support
from nnterp.descriptors import EProperty

from torch import Tensor

from ..layouts import ImageFeatures, ImageTokenMask, Patches
from .availability import no_images
from .scatter import scatter_site


def image_token_id(envoy: Any) -> int:
    """The id of the image placeholder token, off the wrapper's config (``image_token_id``, else ``image_token_index``)."""
    config = envoy.root._module.config
    found = getattr(config, "image_token_id", None)
    return int(found if found is not None else config.image_token_index)


def _scatter_key(envoy: Any) -> str:
    return scatter_site(envoy)[0]


def _scatter_argument(envoy: Any) -> int | str:
    return scatter_site(envoy)[1]


def _input_ids(value: Any) -> Tensor:
    args, kwargs = value
    found = kwargs.get("input_ids")
    return found if found is not None else args[0]


class Vision(Standard):
    """A vision tower's root: its blocks are ``layers``, its sizes its own config's.

    ``patch_embeddings`` is the patch embedding's output, one row per patch
    (before any position embedding, class token or pre-norm); ``tower_output``
    the last block's stream after the tower's final norm where it applies one
    to every patch (CLIP's ``post_layernorm`` normalizes the pooled class row
    only, so there it is the last block's stream). The wrapper reads the tower
    its own way (LLaVA takes ``layers[-2].layer_output`` without the class
    row), so what reaches the projector is ``projector.projector_input``.
    Where the image meets the text: ``image_token_mask``, off the model's
    inputs, and ``image_features``, read at the scatter (``ImageScatter``), so
    ``model.layers[0].layer_input[image_token_mask] == image_features``.
    Every value needs an image to reach the model (``no_images``).

    Sizes (``num_layers``, ``vision_hidden_size``, ``num_heads``,
    ``head_dim``, ``intermediate_size``, ``patch_size``, ``image_size``) are
    the tower config's: the tower's width is named apart from the text
    model's ``hidden_size``, so ``axis_size`` on ``image_features`` walks
    past the tower to the root's.
    """

    @EProperty("patch_embed.output", "The patch embedding's output, one row per patch", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """The patch embeddings, ``[images, patches, vision_hidden_size]``, in raster order.

        The convolution's ``[images, width, rows, columns]`` output viewed one
        row per patch, so in-place edits land; assign a tensor of the same shape to replace it.
        """
        return value.flatten(2).transpose(1, 2)

    @patch_embeddings.postprocess
    def patch_embeddings(self, value: Tensor) -> Tensor:
        side = self.image_size // self.patch_size
        return value.transpose(1, 2).unflatten(2, (side, side))

    # the convolution's output goes on as the view served, laid back on its own grid
    patch_embeddings = patch_embeddings.laid_back(
        lambda envoy, view, served: view.transpose(1, 2).unflatten(2, served.shape[2:])
    )

    @EProperty("output", "The tower's last stream, after its final norm", no_images, select="last_hidden_state")
    def tower_output(self, value: Tensor) -> Patches:
        """The tower's ``last_hidden_state``, ``[images, patches, vision_hidden_size]``. Assign to replace it."""
        return value

    @EProperty(
        "/inputs", "Which tokens are image placeholders", no_images, read_only="it is read off the model's input_ids"
    )
    def image_token_mask(self, value: Any) -> ImageTokenMask:
        """Where the image tokens are, ``[batch, seq]``: ``input_ids == image_token_id``. Read-only."""
        return _input_ids(value) == image_token_id(self)

    @EProperty(
        _scatter_key, "The image features the text model receives at the image tokens", no_images, _scatter_argument
    )
    def image_features(self, value: Tensor) -> ImageFeatures:
        """The features scattered into the image tokens, ``[image_tokens, hidden_size]``, in token order.

        ``model.layers[0].layer_input[vision.image_token_mask] == image_features``.
        A wrapper that hands ``masked_scatter`` its projection unflattened
        (``[images, tokens_per_image, hidden_size]``: PaliGemma, Gemma 3, Aria)
        is served flattened, which is the order ``masked_scatter`` takes it in
        (a view: in-place edits land). Assign a tensor of the same shape to
        replace what the text model receives.
        """
        return value.flatten(0, -2)

    # an unflattened projection goes on as the flat view served
    image_features = image_features.laid_back(lambda envoy, view, served: view.reshape(served.shape))

    # -- around the tower --------------------------------------------------------

    @property
    def projector(self) -> Any:
        """The wrapper's projector (``model.projector``), whose values are ``projector_input`` and ``projector_output``."""
        return self.root.projector

    def support(self, layer: int | None = None) -> dict[str, Any]:
        """The tower's values and its blocks', the way ``StandardizedTransformer.support`` reports the text model's."""
        if layer is not None:
            return blocks_support(self.layers, layer)
        rows: dict[str, Any] = dict(super().support())
        rows.update(blocks_support(self.layers))
        return rows

    # -- sizes -------------------------------------------------------------------

    @property
    def _config(self) -> Any:
        return self._module.config

    @property
    def num_layers(self) -> int:
        """How many blocks the tower holds."""
        return len(self.layers)

    @property
    def vision_hidden_size(self) -> int:
        """Width of the tower's stream."""
        return int(self._config.hidden_size)

    @property
    def num_heads(self) -> int:
        """Query heads of the tower's attention."""
        return int(self._config.num_attention_heads)

    @property
    def head_dim(self) -> int:
        """Width of one head: the config's ``head_dim`` when it says, else ``vision_hidden_size // num_heads``."""
        return int(getattr(self._config, "head_dim", None) or self.vision_hidden_size // self.num_heads)

    @property
    def intermediate_size(self) -> int:
        """Width of the tower's MLP."""
        return int(self._config.intermediate_size)

    @property
    def patch_size(self) -> int:
        """Side of one patch, in pixels."""
        return int(self._config.patch_size)

    @property
    def image_size(self) -> int:
        """Side of the square image the tower is configured for, in pixels."""
        return int(self._config.image_size)
