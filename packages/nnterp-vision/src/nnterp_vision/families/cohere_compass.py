"""Cohere Compass: Qwen3-VL's layout (its tower, merger and DeepStack mergers under Compass's names) over a Cohere text model.

A diff of Qwen3-VL: ``model.visual`` is ``model.vision`` (a ``Qwen3Vision``:
packed, per image, ``PER_IMAGE``), its merger ``model.projector``,
``CohereCompassModel.forward`` the ``ImageScatter``, and the DeepStack
mergers' outputs are added after the first text layers as on Qwen3-VL. The
text blocks are nnterp-text's Cohere family's (one-norm parallel blocks), and
the wrapper multiplies the logits by ``logit_scale`` as the text model does.
"""

from nnterp_text.families import cohere
from nnterp_text.families.cohere import project_on_vocab  # noqa: F401 - the wrapper scales its logits too
from transformers.models.cohere_compass.modeling_cohere_compass import (
    CohereCompassModel,
    CohereCompassVisionAttention,
    CohereCompassVisionBlock,
    CohereCompassVisionMLP,
    CohereCompassVisionModel,
    CohereCompassVisionPatchMerger,
)

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.qwen3 import Qwen3Merger, Qwen3Vision
from .qwen3_vl import RENAME as QWEN3_VL_RENAME
from .qwen3_vl import TASK

__all__ = ["ENVOYS", "RENAME", "TASK", "project_on_vocab"]

RENAME = {**cohere.RENAME, **QWEN3_VL_RENAME}

ENVOYS = {
    CohereCompassVisionModel: Qwen3Vision,
    CohereCompassVisionBlock: QwenVisionLayer,
    CohereCompassVisionAttention: QwenVisionAttention,
    CohereCompassVisionMLP: QwenVisionMlp,
    CohereCompassVisionPatchMerger: Qwen3Merger,
    CohereCompassModel: ImageScatter,
    **cohere.ENVOYS,
}
