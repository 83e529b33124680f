"""A timm model as a wrapper's vision tower (``TimmWrapperModel``): its sizes off the timm model, its ViT blocks' attention.

transformers wraps a timm model in ``TimmWrapperModel`` (``vision_tower.timm_model``),
whose config is ``architecture`` and ``model_args``: none of the sizes a
transformers vision config carries. ``TimmVision`` reads them off the timm
model. Where the timm model is a ViT of pre-norm blocks (``vision_transformer``,
``eva``: PerceptionLM's Perception Encoder), each block is
``x + ls1(attn(norm1(x)))`` then ``+ ls2(mlp(norm2(.)))``, the text block's
shape with an optional layer scale after each sublayer, so ``VisionLayer``
serves it and ``TimmAttention`` / ``TimmMlp`` read each contribution after its
layer scale. The attention is timm's own arithmetic, not transformers'
interface: ``F.scaled_dot_product_attention`` when its ``fused_attn`` is set
(timm's default), else an explicit softmax; ``TimmAttention`` turns
``fused_attn`` off where the model was loaded with
``attn_implementation="eager"`` (transformers does not pass that on to timm),
and reads the pattern where the softmax leaves it.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from nnterp.components.attention import needs_eager
from nnterp.descriptors import EProperty, redefine

import torch
from torch import Tensor

from ..layouts import Patches
from .availability import no_images, or_no_images
from .blocks import VisionAttention, VisionLayer, VisionMlp
from .vision import Vision

#: why timm's attention serves no queries, keys, values or head outputs
TIMM_INTERIOR = (
    "timm's attention splits one qkv projection and applies its rotary embedding inside its own forward, "
    "with no call that receives the queries, keys or values or returns the heads' outputs; its pattern and scores are served"
)
#: why the pattern is not there when timm runs its fused kernel
FUSED = (
    "timm runs this attention through F.scaled_dot_product_attention (fused_attn), which never materializes the pattern; "
    "load with attn_implementation='eager', which turns fused_attn off on the tower's attention"
)


class TimmVision(Vision):
    """A ``TimmWrapperModel`` tower: its sizes read off the timm model (``timm_model``), not off a transformers config.

    ``patch_embeddings`` is timm's ``PatchEmbed`` output, already one row per
    patch (``[images, patches, vision_hidden_size]``, before the class row and
    the position embedding); ``tower_output`` the wrapper's
    ``last_hidden_state``, the timm model's ``forward_features``: every row,
    the class row included, after its final norm where it has one. The
    wrapper scatters its projector's output unflattened (``[tiles, tokens,
    hidden_size]``), so ``image_features`` is that argument viewed
    ``[image_tokens, hidden_size]``.
    """

    @EProperty("patch_embed.output", "The patch embedding's output, one row per patch", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """The patch embeddings, ``[images, patches, vision_hidden_size]``, in raster order. Assign a tensor of the same shape to replace it."""
        return value

    @property
    def _timm(self) -> Any:
        return self._module.timm_model

    @property
    def vision_hidden_size(self) -> int:
        """Width of the tower's stream: the timm model's ``embed_dim`` (``num_features``)."""
        return int(getattr(self._timm, "embed_dim", None) or self._timm.num_features)

    @property
    def num_heads(self) -> int:
        """Query heads of the first block's attention."""
        return int(self._timm.blocks[0].attn.num_heads)

    @property
    def head_dim(self) -> int:
        """Width of one head: the first block's attention's ``head_dim``, else ``vision_hidden_size // num_heads``."""
        return int(getattr(self._timm.blocks[0].attn, "head_dim", None) or self.vision_hidden_size // self.num_heads)

    @property
    def intermediate_size(self) -> int:
        """Width of the tower's MLP: the first block's ``fc1`` output."""
        return int(self._timm.blocks[0].mlp.fc1.out_features)

    @property
    def patch_size(self) -> int:
        """Side of one patch, in pixels."""
        return int(self._timm.patch_embed.patch_size[0])

    @property
    def image_size(self) -> int:
        """Side of the square image (one tile) the tower is built for, in pixels."""
        return int(self._timm.patch_embed.img_size[0])

    @property
    def num_prefix_tokens(self) -> int:
        """Rows in front of the patches: the class token and any register tokens."""
        return int(self._timm.num_prefix_tokens)


def _fused(envoy: Any) -> str | None:
    return FUSED if getattr(envoy._module, "fused_attn", False) else None


class TimmAttention(VisionAttention):
    """A timm ViT block's attention (``Attention``, ``AttentionRope``, ``EvaAttention``): its contribution and its pattern.

    ``attention_output`` is what the block adds to the stream: the
    attention's output after the block's layer scale (``ls1``, Eva's
    ``gamma_1``), read as it leaves ``drop_path1``. The pattern is the
    softmax's output as the values are mixed with it (``attn_drop``'s output)
    and the scores the softmax's input; both need ``fused_attn`` off, which a
    load with ``attn_implementation="eager"`` sets (``FUSED``). The queries,
    keys, values and head outputs are unavailable (``TIMM_INTERIOR``).
    """

    def __init__(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        super().__init__(module, *args, **kwargs)
        self._follow_eager()

    def _update(self, module: torch.nn.Module) -> None:
        # a lazily built model swaps its modules for the loaded ones: turn theirs off too
        super()._update(module)
        self._follow_eager()

    def _follow_eager(self) -> None:
        if needs_eager(self) is None and hasattr(self._module, "fused_attn"):
            self._module.fused_attn = False

    def off_interface(self) -> str | None:
        """Why the pattern is not there: timm's fused kernel runs (``FUSED``), or None."""
        return _fused(self)

    attention_output = VisionAttention.attention_output.at("../drop_path1.output", select=None)
    attention_scores = VisionAttention.attention_scores.at("source.maybe_add_mask_0.output")
    attention_probabilities = VisionAttention.attention_probabilities.at("attn_drop.output")
    attention_queries = VisionAttention.attention_queries.at(unavailable=TIMM_INTERIOR)
    attention_keys = VisionAttention.attention_keys.at(unavailable=TIMM_INTERIOR)
    attention_values = VisionAttention.attention_values.at(unavailable=TIMM_INTERIOR)
    attention_head_outputs = VisionAttention.attention_head_outputs.at(unavailable=TIMM_INTERIOR)


class TimmMlp(VisionMlp):
    """A timm ViT block's MLP (``fc1``, ``act``, ``fc2``): its contribution after the block's layer scale, as it leaves ``drop_path2``."""

    mlp_output = VisionMlp.mlp_output.at("../drop_path2.output", select=None)


# -- convolutional and hybrid towers (FastViT, MobileNetV5) ---------------------------------------


def _unavailable_reason(envoy: Any) -> str:
    return or_no_images(type(envoy).BLOCKS)(envoy)


class ConvBlock(VisionLayer):
    """A block of a convolutional or hybrid timm tower: every block value unavailable, with the family's reason (``BLOCKS``).

    Such a block runs on a 2D feature map whose width changes from stage to
    stage, its token mixer a convolution (or an attention over the map with
    a convolutional MLP), so there is no one ``[images, patches,
    vision_hidden_size]`` stream, nor a sublayer split, for the block values
    to mean what they mean on a ViT. ``support`` names the attention's and
    the MLP's values too, so the checks that need them skip with the reason.
    """

    #: why this tower's blocks serve no values: the family's subclass says it in its own words
    BLOCKS: ClassVar[str] = (
        "a convolutional block: no [images, patches, vision_hidden_size] stream and no sublayer split"
    )

    def support(self) -> dict[str, str | None]:
        """Every block value, and every attention and MLP value, unavailable with ``BLOCKS``."""
        reason = _unavailable_reason(self)
        names = [
            *type(self).values(),
            *(f"self_attn.{name}" for name in VisionAttention.values()),
            *(f"mlp.{name}" for name in VisionMlp.values()),
        ]
        return dict.fromkeys(names, reason)


redefine(
    ConvBlock, **{name: getattr(VisionLayer, name).at(unavailable=_unavailable_reason) for name in ConvBlock.values()}
)


class ConvTimmVision(TimmVision):
    """A convolutional or hybrid timm tower (FastViT, MobileNetV5): its stem, its last feature map, its blocks unavailable.

    The tower returns a feature map, ``[images, channels, rows, columns]``;
    ``tower_output`` is that map viewed one row per position, ``[images,
    rows * columns, vision_hidden_size]``, in raster order (in-place edits
    land; an assigned tensor is laid back on the square grid), which is the
    order the wrapper flattens it in for its projector. ``patch_embeddings`` is
    the stem's output (the first convolutions, a stride of a few pixels),
    viewed the same way: it is the tower's first stream, not one row per
    image token. ``layers`` lists every stage's blocks in order, each a
    ``ConvBlock`` whose values are unavailable (``ConvBlock.BLOCKS``).
    """

    @EProperty("patch_embed.output", "The stem's output, one row per position of its feature map", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """The stem's feature map, ``[images, rows * columns, stem channels]``, in raster order. Assign a tensor of the same shape to replace it."""
        return value.flatten(2).transpose(1, 2)

    @patch_embeddings.postprocess
    def patch_embeddings(self, value: Tensor) -> Tensor:
        return _on_grid(value)

    patch_embeddings = patch_embeddings.laid_back()

    @EProperty("output", "The tower's last feature map, one row per position", no_images, select="last_hidden_state")
    def tower_output(self, value: Tensor) -> Patches:
        """The tower's ``last_hidden_state``, ``[images, rows * columns, vision_hidden_size]``, in raster order. Assign to replace it."""
        return value.flatten(2).transpose(1, 2)

    @tower_output.postprocess
    def tower_output(self, value: Tensor) -> Tensor:
        return _on_grid(value)

    tower_output = tower_output.laid_back()

    #: where the blocks are: the timm model's stage list
    STAGES: ClassVar[str] = "stages"
    #: each stage's block list, or None where a stage is itself the list of its blocks
    STAGE_BLOCKS: ClassVar[str | None] = "blocks"

    @property
    def layers(self) -> list[Any]:
        """Every block of every stage, in the order they run (``ConvBlock``: their values are unavailable)."""
        stages = getattr(self.timm_model, self.STAGES)
        return [
            block for stage in stages for block in (getattr(stage, self.STAGE_BLOCKS) if self.STAGE_BLOCKS else stage)
        ]

    @property
    def vision_hidden_size(self) -> int:
        """Channels of the tower's last feature map: the timm model's ``num_features``."""
        return int(self._timm.num_features)

    @property
    def patch_size(self) -> int:
        """Pixels per side of one ``tower_output`` row: the tower's total stride."""
        return int(self._timm.feature_info[-1]["reduction"])

    def _no_size(self, name: str) -> Any:
        from nnterp.errors import Unavailable

        raise Unavailable(self, name, CONV_SIZES)

    @property
    def num_heads(self) -> int:
        """Unavailable: the blocks differ from stage to stage (``CONV_SIZES``)."""
        return self._no_size("num_heads")

    @property
    def head_dim(self) -> int:
        """Unavailable (``CONV_SIZES``)."""
        return self._no_size("head_dim")

    @property
    def intermediate_size(self) -> int:
        """Unavailable (``CONV_SIZES``)."""
        return self._no_size("intermediate_size")

    @property
    def image_size(self) -> int:
        """Unavailable: a convolutional tower takes any size; the processor's resize sets it (``CONV_SIZES``)."""
        return self._no_size("image_size")

    @property
    def num_prefix_tokens(self) -> int:
        """No rows in front of the positions: a feature map has no class token."""
        return 0


#: why a convolutional tower has no one head count, MLP width or image size
CONV_SIZES = (
    "a convolutional or hybrid tower: its widths, heads and MLPs differ from stage to stage, and it takes any image "
    "size (the processor's resize sets it)"
)


def _on_grid(value: Tensor) -> Tensor:
    """``[images, rows * columns, channels]`` back on its square grid, ``[images, channels, rows, columns]``."""
    side = math.isqrt(value.shape[1])
    if side * side != value.shape[1]:
        raise ValueError(f"{value.shape[1]} positions do not make a square grid: assign in place instead")
    return value.transpose(1, 2).unflatten(2, (side, side))
