"""The Qwen3-VL ViT: the Qwen ViT with learned position embeddings and DeepStack mergers feeding the text model's first layers (Qwen3.5's: none)."""

from __future__ import annotations

from typing import Any

from .qwen import QwenMerger, QwenVision

#: what the DeepStack additions do to the text stream, for the docs and reports
DEEPSTACK = (
    "Qwen3-VL adds each DeepStack merger's output (model.vision.deepstack_merger_list[j].projector_output, "
    "[image_tokens, hidden_size]) to the text stream at the image tokens after text layer j, in the text model's "
    "forward between layers: at the image tokens layers[j].layer_output + that addition == layers[j + 1].layer_input"
)


class Qwen3Merger(QwenMerger):
    """A Qwen3-VL merger: the main one (``model.projector``) or a DeepStack one (``model.vision.deepstack_merger_list[j]``).

    Each takes a block's stream, ``[patches, vision_hidden_size]``, and
    returns ``[image_tokens, hidden_size]``, in merge-block order (the tower
    has no windows). The main merger's output is what the wrapper scatters
    (``vision.image_features``); DeepStack merger ``j`` reads block
    ``vision.deepstack_layers[j]`` and its output is added to the text
    stream at the image tokens after text layer ``j`` (``DEEPSTACK``).
    """

    @property
    def projector_input_size(self) -> int:
        """Width of the merger's input: the tower's (its first linear takes ``spatial_merge_size ** 2`` rows side by side)."""
        return int(self._module.linear_fc1.in_features // self.root.vision.spatial_merge_size**2)


class Qwen3Vision(QwenVision):
    """The Qwen3-VL ViT, at ``model.vision``: ``QwenVision`` with learned position embeddings and DeepStack mergers.

    ``patch_embeddings`` is the 3D convolution's output, before the learned
    position embeddings (resampled to each image's grid) are added. The tower
    has no windows: its blocks' values, ``tower_output`` and every merger's
    input and output are in merge-block order. Blocks ``deepstack_layers``
    each feed a DeepStack merger (``deepstack_merger_list[j]``, a
    ``Qwen3Merger``) whose output the text model adds after its layer ``j``
    at the image tokens (``DEEPSTACK``), so the text stream's
    ``layer_output`` of those layers is not the next layer's
    ``layer_input`` at the image tokens when an image is traced.
    """

    @property
    def deepstack_layers(self) -> tuple[int, ...]:
        """The tower blocks whose streams feed the DeepStack mergers, in merger order; none on a tower without them (Qwen3.5)."""
        return tuple(int(index) for index in getattr(self._config, "deepstack_visual_indexes", None) or ())

    @property
    def deepstack_mergers(self) -> list[Any]:
        """The DeepStack mergers, ``deepstack_merger_list``: merger ``j`` feeds text layer ``j``'s output; none on Qwen3.5."""
        return list(self.deepstack_merger_list) if "deepstack_merger_list" in self.__dict__ else []
