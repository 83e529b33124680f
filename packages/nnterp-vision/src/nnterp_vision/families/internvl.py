"""InternVL (2.5 / 3): an InternViT tower, a pixel shuffle, an MLP projector and a Qwen2 text model, under InternVLForConditionalGeneration.

A diff of LLaVA: LLaVA's paths (``model.vision``, ``model.projector``, the
text model's standard names), but the tower is InternViT, its modules named
BEiT's way (``encoder.layer``, ``layernorm_before``, ``attention``,
``projection_layer``, ``fc1`` ...) and aliased to the standard ones. Each
block scales its sublayers' outputs by learned vectors before adding them
(``lambda_1``, ``lambda_2``), so the contributions are the scaled outputs
(``LayerScaledAttention``, ``LayerScaledMlp``). The processor cuts each image
into tiles of the tower's ``image_size`` and a thumbnail (the tower's
``images`` axis runs over crops); ``InternVLModel`` drops the class row,
pixel-shuffles each crop's patch grid (each square of ``1 / downsample_ratio``
patches into one row) and calls the projector (``projector_input`` is the
shuffled rows, ``[crops, image_tokens_per_crop, 4 * vision_hidden_size]``);
its ``forward`` scatters the projection (``inputs_embeds.masked_scatter``),
so it is the ``ImageScatter``. The text model is Qwen2's (or whatever the
config names), served by the default family.

The prompt's placeholder is ``<IMG_CONTEXT>`` (``processor.image_token``);
the processor writes ``<img>``, ``image_seq_length`` ``<IMG_CONTEXT>``
tokens per crop, and ``</img>``; ``image_token_mask`` is the ``<IMG_CONTEXT>`` tokens.
"""

from nnterp.families import default

from transformers.models.internvl.modeling_internvl import (
    InternVLModel,
    InternVLVisionAttention,
    InternVLVisionLayer,
    InternVLVisionMLP,
    InternVLVisionModel,
)

from ..components import ImageScatter, VisionLayer
from ..components.internvl import InternVision, InternVLProjector, LayerScaledAttention, LayerScaledMlp
from ..family import VisionFamily
from ..tiny.internvl import TINY
from . import llava

FAMILY = VisionFamily(
    name="internvl",
    model_types=("internvl",),
    rename={
        **llava.WRAPPER,
        # InternViT's modules, under the standard names
        "encoder.layer": "layers",
        "embeddings.patch_embeddings.projection": "patch_embed",
        "layernorm_before": "input_layernorm",
        "layernorm_after": "post_attention_layernorm",
        "attention": "self_attn",
        "projection_layer": "o_proj",
        "fc1": "up_proj",
        "fc2": "down_proj",
        "activation_fn": "act_fn",
    },
    envoys={
        InternVLVisionModel: InternVision,
        InternVLVisionLayer: VisionLayer,
        InternVLVisionAttention: LayerScaledAttention,
        InternVLVisionMLP: LayerScaledMlp,
        "projector": InternVLProjector,
        InternVLModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # an InternViT on 16-pixel crops (the checks' image: 4 tiles and a thumbnail), 4 image tokens each
    tiny={"internvl": TINY},
)
