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
from ..tiny.qwen3_vl import Qwen3VLTinyConfig
from ..tiny.sizes import QWEN3_TEXT, QWEN3_VL_VIT, QWEN_TOKENS, TEXT
from . import qwen3_vl

FAMILY = qwen3_vl.FAMILY.replace(
    name="cosmos3_omni",
    model_types=("cosmos3_omni",),
    envoys={Cosmos3OmniModel: ImageScatter, **qwen3_vl.FAMILY.envoys},
    tiny={
        # Qwen3-VL's tower, DeepStack and text model under its own config type; 6 image tokens for the checks' image
        "cosmos3_omni": Qwen3VLTinyConfig(
            "cosmos3_omni",
            {
                # its nested configs are declared through AutoConfig, so not shrunk: the text model's sizes given whole
                "text_config": {**TEXT, **QWEN3_TEXT, "model_type": "qwen3_vl_text"},
                "vision_config": {**QWEN3_VL_VIT, "model_type": "qwen3_vl_vision"},
                **QWEN_TOKENS,
            },
            load={"attn_implementation": "eager"},
        ),
    },
    skips={
        "cosmos3_omni": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
