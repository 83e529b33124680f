"""Janus (and Janus-Pro), understanding: a SigLIP-layout tower, an MLP aligner and a Llama text model, under JanusForConditionalGeneration.

A diff of DeepSeek-VL (itself LLaVA-shaped): the tower is ``model.vision``
(native ``model.model.vision_model``, a ``JanusVisionModel``: SigLIP's
``encoder.layers``, ``layer_norm1``, ``fc1`` ... under Janus class names;
its attention's output projection ``projection_layer`` is aliased
``o_proj``), no class row, ``post_layernorm`` over every patch, so
``tower_output`` is what the aligner takes. The aligner (``model.projector``,
native ``model.model.aligner``: ``fc1``, then GELU and a linear per
``depth``) maps each patch to one image token, and ``JanusModel.forward``
flattens it into ``inputs_embeds.masked_scatter`` (the ``ImageScatter``).
The processor writes each image as ``<begin_of_image>``, ``num_image_tokens``
image tokens and ``<end_of_image>``; the prompt's placeholder is
``processor.image_token``. The VQ-VAE, ``generation_embeddings``,
``generation_aligner`` and ``generation_head`` serve image generation only:
no text trace runs them, and they are left unmapped.
"""

from nnterp.families import default

from transformers.models.janus.modeling_janus import (
    JanusModel,
    JanusVisionAttention,
    JanusVisionEncoderLayer,
    JanusVisionMLP,
    JanusVisionModel,
)

from ..components import ImageScatter, Projector, VisionAttention, VisionLayer, VisionMlp
from ..components.janus import JanusVision
from ..tiny.janus import TINY
from . import deepseek_vl

FAMILY = deepseek_vl.FAMILY.replace(
    name="janus",
    model_types=("janus",),
    # DeepSeek-VL's paths; the tower attention's output projection is projection_layer (not SigLIP's out_proj)
    rename={
        **{key: value for key, value in deepseek_vl.FAMILY.rename.items() if key != "out_proj"},
        "self_attn.projection_layer": "self_attn.o_proj",
    },
    envoys={
        JanusVisionModel: JanusVision,
        JanusVisionEncoderLayer: VisionLayer,
        JanusVisionAttention: VisionAttention,
        JanusVisionMLP: VisionMlp,
        "projector": Projector,
        JanusModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # a SigLIP-layout tower's 16 patches through an MLP aligner, 16 image tokens per image (a small VQ-VAE beside it)
    tiny={"janus": TINY},
)
