"""SmolVLM: Idefics3's tree (``families.idefics3``) under its own class names, scattering inline.

The tower, connector and text model are Idefics3's, renamed the same way;
what differs is where the features go in: ``SmolVLMModel.forward`` calls
``inputs_embeds.masked_scatter(special_image_mask, image_hidden_states)``
itself, so the inner model is the plain ``ImageScatter`` (LLaVA's operation
and argument).
"""

from nnterp.families import default

from transformers.models.smolvlm.modeling_smolvlm import (
    SmolVLMConnector,
    SmolVLMEncoderLayer,
    SmolVLMModel,
    SmolVLMVisionAttention,
    SmolVLMVisionMLP,
    SmolVLMVisionTransformer,
)

from ..components import ImageScatter, Vision, VisionAttention, VisionLayer, VisionMlp
from ..components.idefics3 import ShuffleConnector
from ..tiny.idefics3 import SMOLVLM
from . import idefics3

FAMILY = idefics3.FAMILY.replace(
    name="smolvlm",
    model_types=("smolvlm",),
    envoys={
        SmolVLMVisionTransformer: Vision,
        SmolVLMEncoderLayer: VisionLayer,
        SmolVLMVisionAttention: VisionAttention,
        SmolVLMVisionMLP: VisionMlp,
        SmolVLMConnector: ShuffleConnector,
        SmolVLMModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={"smolvlm": SMOLVLM},
)
