"""Cosmos 3 (Reasoner): Qwen3-VL under NVIDIA's config type, under Cosmos3OmniForConditionalGeneration.

A diff of Qwen3-VL: ``Cosmos3OmniModel`` is a copy of ``Qwen3VLModel``
(its forward scatters the main merger's output with
``inputs_embeds.masked_scatter``, the ``ImageScatter``) holding Qwen3-VL's
own tower (``qwen3_vl_vision``, DeepStack included) and text model
(``qwen3_vl_text``), so every other key, name and value is Qwen3-VL's. The
hub checkpoint also carries the generator, sound and action towers, which
transformers drops on load: only the image-to-text path exists to serve.
"""

from transformers.models.cosmos3_omni.modeling_cosmos3_omni import Cosmos3OmniModel

from ..components import ImageScatter
from .qwen3_vl import ENVOYS as QWEN3_VL_ENVOYS
from .qwen3_vl import RENAME, TASK

__all__ = ["ENVOYS", "RENAME", "TASK"]

ENVOYS = {Cosmos3OmniModel: ImageScatter, **QWEN3_VL_ENVOYS}
