"""Llama 4: a Llama 4 ViT (its pixel shuffle inside), a linear projector and the Llama 4 text model, under Llama4ForConditionalGeneration.

The wrapper has no inner model: ``Llama4ForConditionalGeneration.forward``
runs the tower, projects it and scatters the projection into the token
embeddings itself, so the root is the scatter's host (``root_scatter``, the
operation's name in the root's ``.source``) and its forward is instrumented
at build. The text model keeps nnterp-text's Llama 4 family (``llama4_text``: its
mixture, ``feed_forward`` as ``mlp``) under ``language_model.model``; the tower is
``model.vision`` (``Llama4Vision``), its blocks ``model.vision.layers[i]``
already under the standard names (``input_layernorm``, ``self_attn`` with
``q_proj`` ... ``o_proj``, ``mlp`` with ``fc1``/``fc2`` aliased
``up_proj``/``down_proj``); the projector is ``model.projector``.
``image_token_mask`` is the ``<|patch|>`` tokens (the config's
``image_token_index``).
"""

from transformers.models.llama4.modeling_llama4 import (
    Llama4MultiModalProjector,
    Llama4VisionAttention,
    Llama4VisionEncoderLayer,
    Llama4VisionMLP,
    Llama4VisionModel,
)

from ..components import VisionAttention, VisionLayer, VisionMlp
from ..components.llama4 import Llama4Vision
from ..components.projector import AdaptedProjector
from ..family import VisionFamily
from ..tiny.llama4 import TINY

FAMILY = VisionFamily(
    name="llama4",
    model_types=("llama4",),
    rename={
        "language_model.model.layers": "layers",
        "language_model.model.embed_tokens": "embed_tokens",
        "language_model.model.norm": "norm",
        "language_model.lm_head": "lm_head",
        "vision_model": "vision",
        "multi_modal_projector": "projector",
        # the tower's modules, under the standard names
        "model.layers": "layers",
        "patch_embedding": "patch_embed",
        "fc1": "up_proj",
        "fc2": "down_proj",
    },
    envoys={
        Llama4VisionModel: Llama4Vision,
        Llama4VisionEncoderLayer: VisionLayer,
        Llama4VisionAttention: VisionAttention,
        Llama4VisionMLP: VisionMlp,
        Llama4MultiModalProjector: AdaptedProjector,
    },
    # the text blocks (the default's, the mixture at layers.*.mlp, feed_forward as mlp): Llama 4's text family's
    text_family="llama4_text",
    # the operation of the root's forward that writes the projected features into the embeddings (instrumented at build)
    root_scatter="inputs_embeds_masked_scatter_0",
    # the checks' image resized to 32 x 32: 16 patches (and a class row, last), pixel-shuffled into 4 image tokens
    tiny={"llama4": TINY},
    skips={
        "llama4": {
            "projector_reads_the_selected_stream": "the projector takes what the tower's own adapter returns",
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "Llama 4 multiplies each expert's input by its sigmoid score, not its",
            "zeroed_slot_leaves_the_sum": "Llama 4 multiplies each expert's input by its sigmoid score, not its",
        },
    },
)
