"""PaddleOCR-VL's tower: a SigLIP-named ViT run packed like the Qwen ViT, its merging projector outside it."""

from __future__ import annotations

from nnterp.descriptors import EProperty

from torch import Tensor

from ..layouts import Patches
from .availability import no_images
from .qwen import QwenMerger, QwenVision


class PaddleOcrVision(QwenVision):
    """PaddleOCR-VL's tower (NaViT-style SigLIP), at ``model.vision``: packed, per-image attention, no merger inside.

    The processor cuts each image into ``patch_size`` squares (one frame
    deep), in raster order within 2 x 2 merge blocks as the Qwen processors
    do; the tower runs on ``[patches, vision_hidden_size]``, every image's
    patches concatenated, so its stream values are ``[1, patches,
    vision_hidden_size]`` views (``QwenVision``), and its attention splits
    per image (``PER_IMAGE``). Its modules carry SigLIP's names, aliased as
    on LLaVA. ``tower_output`` is its ``last_hidden_state``: ``post_layernorm``
    over every patch, exactly what the projector (``model.projector``, outside
    the tower) takes. Sizes are SigLIP's config names (``num_attention_heads``).
    """

    @EProperty("patch_embed.output", "Every image's patch embeddings, packed in one row", no_images)
    def patch_embeddings(self, value: Tensor) -> Patches:
        """Every image's patch embeddings, ``[1, patches, vision_hidden_size]``, before the position embeddings.

        The 2D convolution runs on each patch alone (``[patches, width, 1, 1]``);
        this is that output viewed one row per patch. Assign a tensor of the same shape to replace it.
        """
        return value.flatten(1).unsqueeze(0)

    @patch_embeddings.postprocess
    def patch_embeddings(self, value: Tensor) -> Tensor:
        return value.squeeze(0)[:, :, None, None]

    patch_embeddings = patch_embeddings.laid_back()


class PaddleOcrProjector(QwenMerger):
    """PaddleOCR-VL's projector (``model.projector``): a norm, each 2 x 2 merge block concatenated, two linears.

    It takes ``tower_output`` as the tower returns it, ``[patches,
    vision_hidden_size]`` (and the grid), folds each image's merge blocks into
    rows ``4 * vision_hidden_size`` wide and returns ``[image_tokens,
    hidden_size]``, every image's in order: what the wrapper scatters, so
    ``projector_output == vision.image_features``. It runs after the tower.
    """

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input: its norm's, the tower's (the merge widens it four times after)."""
        return int(self._module.pre_norm.normalized_shape[0])
