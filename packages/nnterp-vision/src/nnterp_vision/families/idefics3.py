"""Idefics3: an Idefics3 ViT, a pixel-shuffle connector and a Llama text model, under Idefics3ForConditionalGeneration.

A diff of LLaVA: the text model is ``model.text_model`` (its standard names
renamed), the tower ``model.vision`` (``Idefics3VisionTransformer``, SigLIP's
modules under CLIP's names: ``encoder.layers``, ``layer_norm1``,
``out_proj``, ``fc1`` ...), the connector ``model.projector``. The tower has
no class row, and its ``post_layernorm`` norms every patch, so
``tower_output`` is exactly what the connector takes; the connector folds
each ``scale_factor`` square of patches into one token (the pixel shuffle)
and projects it. ``Idefics3Model.forward`` writes the features in through
its own ``self.inputs_merger(..., image_hidden_states=...)`` (a
``MergerScatter``), so ``image_features`` is that argument. The processor
wraps each image's tokens in ``<fake_token_around_image><global-img>`` ...
``<fake_token_around_image>``; ``image_token_mask`` is the ``<image>``
tokens alone. With image splitting on (the real checkpoints' default) an
image is several tiles plus the global view, each a row of the tower's
``images`` axis and ``image_seq_len`` tokens, in the prompt's order.
SmolVLM (``families.smolvlm``) is this tree under its own class names, scattering inline.
"""

from nnterp.families import default

from transformers.models.idefics3.modeling_idefics3 import (
    Idefics3Connector,
    Idefics3EncoderLayer,
    Idefics3Model,
    Idefics3VisionAttention,
    Idefics3VisionMLP,
    Idefics3VisionTransformer,
)

from ..components import Vision, VisionAttention, VisionLayer, VisionMlp
from ..components.idefics3 import MergerScatter, ShuffleConnector
from ..family import VisionFamily
from ..tiny.idefics3 import TINY
from . import llava

FAMILY = VisionFamily(
    name="idefics3",
    model_types=("idefics3",),
    rename={
        **llava.CLIP_TOWER,
        "model.text_model.layers": "layers",
        "model.text_model.embed_tokens": "embed_tokens",
        "model.text_model.norm": "norm",
        "model.vision_model": "vision",
        "model.connector": "projector",
    },
    envoys={
        Idefics3VisionTransformer: Vision,
        Idefics3EncoderLayer: VisionLayer,
        Idefics3VisionAttention: VisionAttention,
        Idefics3VisionMLP: VisionMlp,
        Idefics3Connector: ShuffleConnector,
        Idefics3Model: MergerScatter,
        **default.FAMILY.envoys,
    },
    tiny={"idefics3": TINY},
)
