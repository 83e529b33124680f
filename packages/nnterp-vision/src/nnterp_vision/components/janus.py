"""Janus's understanding tower: SigLIP's block layout under Janus class names, its MLP width a ratio of its own."""

from __future__ import annotations

from .vision import Vision


class JanusVision(Vision):
    """Janus's ``JanusVisionModel``: no class row, and ``post_layernorm`` norms every patch, so ``tower_output`` is what the aligner takes.

    Its config names the MLP's width as ``mlp_ratio`` times ``hidden_size``
    (no ``intermediate_size``), which ``intermediate_size`` reads here.
    """

    @property
    def intermediate_size(self) -> int:
        """Width of the tower's MLP: ``hidden_size * mlp_ratio``, as ``JanusVisionMLP`` builds it."""
        return int(self._config.hidden_size * self._config.mlp_ratio)
