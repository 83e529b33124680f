"""The Qwen ViT (Qwen2-VL, Qwen2.5-VL): packed, its merger inside, its attention one interface call per image."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nnterp.descriptors import EProperty, redefining, unavailable
from nnterp.errors import Unavailable
from nnterp.layouts import HIDDEN, HeadOutputs, Keys, Queries, Values

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGE_TOKENS, PATCHES, Patches
from .availability import no_images, or_no_images
from .blocks import STREAM, VisionAttention, VisionLayer, VisionMlp
from .projector import Projector
from .vision import Vision

#: why the Qwen ViT's attention has no scores or pattern
PER_IMAGE = (
    "this packed tower's attention (the Qwen ViT's, and its kin's) splits its queries, keys and values per image "
    "(per window on Qwen2.5-VL) and calls "
    "the attention interface once for each, under every implementation, so no one scores or pattern tensor exists; "
    "attention_queries, attention_keys, attention_values and attention_head_outputs are served whole"
)
#: why no gradient of the logits reaches the Qwen ViT's tower_output
READ_AFTER_THE_MERGER = (
    "served where the tower returns it, after its merger has taken the last block's stream: the logits depend on "
    "that stream through layers[-1].layer_output, not on this view of it"
)
#: what to write instead of the Qwen ViT's tower_output, which nothing downstream reads
WRITE_INSTEAD = "; to change what the merger takes, write vision.layers[-1].layer_output"
#: why the Qwen ViT has no image_size
ANY_RESOLUTION = (
    "the Qwen ViT takes any resolution: the processor resizes each image to a multiple of patch_size * "
    "spatial_merge_size within its pixel bounds, and image_grid_thw gives each image's grid"
)


def packed(value: EProperty) -> EProperty:
    """``value`` as the Qwen ViT serves it: ``[patches, width]`` viewed ``[1, patches, width]``, and squeezed back on write."""
    base_write = value._postprocess

    def write(envoy: Any, written: Tensor) -> Tensor:
        written = written.squeeze(0)
        return base_write(envoy, written) if base_write is not None else written

    # the tower goes on from the view served, so a backward reaches it
    return value.reading(lambda envoy, read: read.unsqueeze(0), write=write).laid_back()


def each_packed(names: tuple[str, ...]) -> Callable[[type], type]:
    """A class decorator: each inherited value of ``names`` ``packed``."""
    return redefining(names, packed)


@each_packed(STREAM)
class QwenVisionLayer(VisionLayer):
    """A Qwen ViT block: ``layer_input + attention_output + mlp_output == layer_output``, over ``[1, patches, vision_hidden_size]``.

    The block runs on ``[patches, vision_hidden_size]``; every stream value is
    that tensor viewed with a leading 1 (in-place edits land), and a written
    ``[1, patches, vision_hidden_size]`` is squeezed back.
    """


@each_packed(("mlp_output", "mlp_activation", "mlp_neurons"))
class QwenVisionMlp(VisionMlp):
    """A Qwen ViT block's MLP: its contribution ``[1, patches, vision_hidden_size]``, its neurons ``[1, patches, intermediate]``."""


def flash_reason(envoy: Any) -> str | None:
    """Why the head outputs are unavailable: only under flash attention, one varlen call with nothing concatenated."""
    implementation = getattr(envoy._module.config, "_attn_implementation", None) or "eager"
    if "flash" in implementation:
        return (
            f"this model runs attn_implementation={implementation!r}, which packs every image into one varlen "
            "kernel call and never concatenates per-image head outputs; load with attn_implementation='eager'"
        )
    return None


#: the forward's operations, as ``.source`` names them
#: (the queries, keys and values are the outputs of the unsqueeze that gives each its leading 1)
QUERIES, KEYS, VALUES = "unsqueeze_0", "unsqueeze_1", "unsqueeze_2"
HEAD_OUTPUTS = "torch_cat_0"


def _whole(operation: str) -> str:
    return f"source.{operation}.output"


@each_packed(("attention_output",))
class QwenVisionAttention(VisionAttention):
    """The Qwen ViT's attention: one interface call per image (or window), so the interior is read whole around them.

    ``attention_queries``, ``attention_keys`` and ``attention_values`` are
    the whole ``[1, heads, patches, head_dim]`` tensors (the queries and keys
    after the 2D rotary embedding) before the module splits them per image,
    under any implementation, and ``attention_head_outputs`` is the
    per-image outputs concatenated back, ``[1, patches, heads, head_dim]``,
    under any implementation but flash (one varlen call, no concatenation).
    ``attention_output`` is the module's ``[patches, vision_hidden_size]``
    viewed ``[1, patches, vision_hidden_size]``. ``attention_scores`` and
    ``attention_probabilities`` are Unavailable (``PER_IMAGE``): loading
    eager does not help, since the module splits under every implementation.
    """

    def off_interface(self) -> str | None:
        """Why the head outputs are unavailable: flash attention only (the module reads the rest before the interface)."""
        return flash_reason(self)

    @EProperty(_whole(QUERIES), "Every image's queries, before the per-image split", no_images)
    def attention_queries(self, value: Tensor) -> Queries:
        """Every image's queries, ``[1, heads, patches, head_dim]``, before the per-image split; assign or edit in place."""
        return value

    @EProperty(_whole(KEYS), "Every image's keys, before the per-image split", no_images)
    def attention_keys(self, value: Tensor) -> Keys:
        """Every image's keys, ``[1, heads, patches, head_dim]``, before the per-image split; assign or edit in place."""
        return value

    @EProperty(_whole(VALUES), "Every image's values, before the per-image split", no_images)
    def attention_values(self, value: Tensor) -> Values:
        """Every image's values, ``[1, heads, patches, head_dim]``, before the per-image split; assign or edit in place."""
        return value

    attention_scores = unavailable(PER_IMAGE)
    attention_probabilities = unavailable(PER_IMAGE)

    @EProperty(_whole(HEAD_OUTPUTS), "Every image's per-head outputs, concatenated back", or_no_images(flash_reason))
    def attention_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Every image's per-head outputs concatenated back, ``[1, patches, heads, head_dim]``, before the output projection."""
        return value


class QwenVision(Vision):
    """The Qwen ViT (Qwen2-VL, Qwen2.5-VL): packed, its merger inside, at ``model.visual``.

    The tower runs on ``[patches, vision_hidden_size]``, every image's
    patches concatenated, so its stream values are ``Patches`` with 1 in the
    images axis, ``[1, patches, vision_hidden_size]`` (views: in-place edits
    land; a written value is squeezed back), and its blocks' attention is a
    ``QwenVisionAttention``.

    The processor cuts each image into ``patch_size`` squares (two frames
    deep), and lays them out in ``spatial_merge_size`` x
    ``spatial_merge_size`` blocks, each block's patches consecutive, images
    one after another; the merger folds each block into one image token. So
    ``patches`` runs over every image of the invoke, ``image_grid_thw``
    (``[t, h, w]`` per image, in patches) splits it, and an image's patches
    are in merge-block order, not raster order. Qwen2.5-VL's tower further
    permutes them into attention windows at entry: its blocks' values,
    ``tower_output`` and the merger's output are in window order, and the
    tower restores the merge-block order after the merger.

    The tower has no final norm, so ``tower_output`` is the last block's
    stream, the merger's input. It is served at the tower's output, after
    the merger has run, so ``projector.projector_input`` and
    ``projector.projector_output`` are read before ``tower_output``, and it
    is read-only: nothing downstream reads it, so an assignment would change
    nothing (write ``layers[-1].layer_output`` instead).

    Sizes, off the vision config: ``vision_hidden_size`` is the tower's width
    (``embed_dim`` on Qwen2-VL, whose config's ``hidden_size`` is the
    merger's output width), ``num_heads``, ``intermediate_size`` (Qwen2-VL's
    is ``embed_dim * mlp_ratio``), ``patch_size``, ``spatial_merge_size`` and
    ``window_size`` (Qwen2.5-VL's, in pixels; None on the others).
    ``image_size`` is Unavailable: the tower takes any resolution.
    """

    @EProperty("patch_embed.output", "Every image's patch embeddings, packed in one row", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """Every image's patch embeddings, ``[1, patches, vision_hidden_size]``, images in order, each in merge-block order.

        The 3D convolution's output (each patch two frames deep), one row per
        patch, viewed with a leading 1. Assign a tensor of the same shape to replace it.
        """
        return value.unsqueeze(0)

    @patch_embeddings.postprocess
    def patch_embeddings(self, value: Tensor) -> Tensor:
        return value.squeeze(0)

    patch_embeddings = patch_embeddings.laid_back()
    tower_output = packed(
        Vision.tower_output.at(off_the_graph=READ_AFTER_THE_MERGER, read_only=READ_AFTER_THE_MERGER + WRITE_INSTEAD)
    )

    @property
    def vision_hidden_size(self) -> int:
        """Width of the tower's stream: ``embed_dim`` on Qwen2-VL (its ``hidden_size`` is the merger's output), else ``hidden_size``."""
        return int(getattr(self._config, "embed_dim", None) or self._config.hidden_size)

    @property
    def num_heads(self) -> int:
        """Query heads of the tower's attention: the config's ``num_heads``, or ``num_attention_heads`` (SigLIP's name)."""
        return int(getattr(self._config, "num_heads", None) or self._config.num_attention_heads)

    @property
    def intermediate_size(self) -> int:
        """Width of the tower's MLP: the config's ``intermediate_size``, else ``embed_dim * mlp_ratio`` (Qwen2-VL)."""
        found = getattr(self._config, "intermediate_size", None)
        return int(found if found is not None else self.vision_hidden_size * self._config.mlp_ratio)

    @property
    def spatial_merge_size(self) -> int:
        """Side of the square of patches the merger folds into one image token."""
        return int(self._config.spatial_merge_size)

    @property
    def window_size(self) -> int | None:
        """Side of an attention window in pixels (Qwen2.5-VL); None on a tower whose blocks all attend per image."""
        found = getattr(self._config, "window_size", None)
        return int(found) if found is not None else None

    @property
    def image_size(self) -> int:
        """Unavailable: the tower takes any resolution (``ANY_RESOLUTION``)."""
        raise Unavailable(self, "image_size", ANY_RESOLUTION)


#: what the merger takes: the last block's stream, [patches, vision_hidden_size], as the tower hands it
MergerInput = Float[Tensor, f"{PATCHES} projector_input_size"]
#: what it returns: one row per image token, every image's
MergerOutput = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]


class QwenMerger(Projector):
    """The Qwen ViT's merger (``model.visual.merger``, as ``model.projector``): a norm, each merge block concatenated, an MLP.

    It takes the last block's stream as the tower holds it, ``[patches,
    vision_hidden_size]``, and returns ``[image_tokens, hidden_size]``, every
    image's tokens in order; on Qwen2-VL that is what the wrapper scatters,
    so ``projector_output == vision.image_features``. It runs inside the
    tower, so its values are read before ``vision.tower_output``.
    """

    @EProperty("input", "What the merger is called with", no_images)
    def projector_input(self, value: Tensor) -> MergerInput:
        """The last block's stream, ``[patches, vision_hidden_size]``. Assign to replace it."""
        return value

    @EProperty("output", "What the merger returns", no_images)
    def projector_output(self, value: Tensor) -> MergerOutput:
        """The merged, projected features, ``[image_tokens, hidden_size]``, in the tower's order."""
        return value

    @property
    def projector_input_size(self) -> int:
        """Width of the merger's input: its norm's (the merge widens it by ``spatial_merge_size ** 2`` after)."""
        return int(self._module.ln_q.normalized_shape[0])
