"""MoonViT (Kimi-K2.5's tower): the packed Qwen ViT layout with separate q, k and v, a final norm and a mean pool inside."""

from __future__ import annotations

from nnterp.descriptors import EProperty
from nnterp.layouts import HIDDEN

from jaxtyping import Float
from torch import Tensor

from ..layouts import IMAGE_TOKENS
from .availability import no_images
from .projector import Projector
from .qwen import QwenVision, QwenVisionAttention, packed
from .vision import Vision

#: what the projector takes: one row per image token, each its merge kernel's patches (mean-pooled over frames) kept apart
PooledInput = Float[Tensor, f"{IMAGE_TOKENS} merge_patches projector_input_size"]
#: what it returns, its unit axis dropped: one row per image token, every image's
PooledOutput = Float[Tensor, f"{IMAGE_TOKENS} {HIDDEN}"]


#: why MoonViT's projector input is no tower stream as it is
POOLED = (
    "MoonViT gathers its final norm's output by merge kernel and means it over the frames inside the tower "
    "(temporal_merge, by each image's grid_thw): the projector takes that pooled output, not a stream of the tower"
)


class MoonVitAttention(QwenVisionAttention):
    """MoonViT's attention: ``QwenVisionAttention`` whose whole queries, keys and values are its three transposes' outputs.

    The module projects q, k and v separately, applies the 2D rotary
    embedding to q and k, and transposes each to ``[1, heads, patches,
    head_dim]`` (``query_states_transpose_0`` and its kin in ``.source``) before the
    per-image split: those are ``attention_queries``, ``attention_keys`` and
    ``attention_values``. The head outputs are concatenated back as on the Qwen ViT.
    """

    attention_queries = QwenVisionAttention.attention_queries.at("source.query_states_transpose_0.output")
    attention_keys = QwenVisionAttention.attention_keys.at("source.key_states_transpose_0.output")
    attention_values = QwenVisionAttention.attention_values.at("source.value_states_transpose_0.output")


class MoonVit(QwenVision):
    """MoonViT, at ``model.vision`` (``model.vision_tower``): packed blocks over every image's patches, a final norm, a pool.

    ``patch_embeddings`` is ``patch_embed``'s output, the convolution's rows
    with the learned (interpolated) position embeddings added. The blocks run
    on ``[patches, vision_hidden_size]`` in raster order per image, and the
    final norm's output is ``tower_output``, ``[1, patches, vision_hidden_size]``.
    The tower then gathers each ``merge_kernel_size`` square (and every frame)
    and means over the frames: its pooled output, ``[image_tokens, kh * kw,
    vision_hidden_size]``, is what the projector (``mm_projector``, outside the
    tower) takes.
    """

    tower_output = packed(Vision.tower_output.at("final_layernorm.output", select=None))

    @property
    def spatial_merge_size(self) -> int:
        """Side of the square of patches one image token pools: the config's ``merge_kernel_size``."""
        return int(self._config.merge_kernel_size[0])


class MoonVitProjector(Projector):
    """Kimi-K2.5's ``mm_projector``: a norm per patch, each merge kernel's patches concatenated, a two-layer GELU MLP.

    It takes the tower's pooled output, ``[image_tokens, kh * kw,
    vision_hidden_size]``, and returns ``[image_tokens, 1, hidden_size]``,
    served without its unit axis as ``[image_tokens, hidden_size]`` (a written
    value gains it back): the wrapper squeezes it, splits it per image and
    scatters it, so ``projector_output == vision.image_features``.
    """

    no_selection = POOLED

    @EProperty("input", "What the projector is called with: the tower's pooled output", no_images)
    def projector_input(self, value: Tensor) -> PooledInput:
        """The pooled patches, ``[image_tokens, kh * kw, vision_hidden_size]``. Assign to replace it."""
        return value

    @EProperty("output", "What the projector returns", no_images)
    def projector_output(self, value: Tensor) -> PooledOutput:
        """The projected features, ``[image_tokens, hidden_size]``, every image's in order."""
        return value.squeeze(1)

    @projector_output.postprocess
    def projector_output(self, value: Tensor) -> Tensor:
        return value.unsqueeze(1)

    projector_output = projector_output.laid_back()

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input rows: its norm's (the tower's width; the concatenation widens it by kh * kw after)."""
        return int(self._module.pre_norm.normalized_shape[0])
