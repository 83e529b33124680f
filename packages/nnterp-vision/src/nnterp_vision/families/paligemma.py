"""PaliGemma (1 and 2): a SigLIP tower, a one-layer linear projector and a Gemma text model, under PaliGemmaForConditionalGeneration.

A diff of LLaVA: the tower is SigLIP, whose modules carry CLIP's names
(``vision_model.encoder.layers``, ``layer_norm1``, ``out_proj``, ``fc1`` ...),
so the same renames hold; it has no class row, and its ``post_layernorm``
norms every patch, so ``tower_output`` (the tower's ``last_hidden_state``) is
exactly what the projector takes (``projector.linear``, tower width to text
width). ``PaliGemmaModel.forward`` runs the tower and scatters the projection
into the token embeddings (``inputs_embeds.masked_scatter``), so it is the
``ImageScatter``; Gemma scales its token embeddings inside ``embed_tokens``,
not after the scatter, so the scattered features are what ``layers[0]``
receives. The text model is Gemma's (PaliGemma 1) or Gemma-2's (PaliGemma 2,
its sandwich blocks keyed by type, its logits softcapped where the config says).

The processor writes ``image_seq_length`` image tokens, BOS, the prompt and a
newline, and ``token_type_ids`` of zero over all of them: the text model's
mask is causal except inside that prefix, where every image and prompt token
attends to every other (``block_sequence_ids``), so a prompt token's stream
depends on the tokens after it within the prefix. A text-only trace (no
processor call) is causal. Trace with ``model.trace("<image>caption", images=[image])``.
"""

from typing import Any

from nnterp import PostNormAttention, PostNormMlp, SandwichLayer
from nnterp.families import default
from nnterp.logits import softcapped

from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention, Gemma2DecoderLayer, Gemma2MLP
from transformers.models.paligemma.modeling_paligemma import PaliGemmaModel
from transformers.models.siglip.modeling_siglip import SiglipAttention, SiglipEncoderLayer, SiglipMLP, SiglipVisionModel

from ..components import ImageScatter, Projector, VisionAttention, VisionLayer, VisionMlp
from ..components.siglip import SiglipVision
from ..family import VisionFamily
from ..tiny.paligemma import TINY
from . import llava

#: SigLIP's tower blocks by module type, as CLIP's on LLaVA (the tower itself is keyed by each family)
SIGLIP_BLOCKS = {SiglipEncoderLayer: VisionLayer, SiglipAttention: VisionAttention, SiglipMLP: VisionMlp}


def prepare_invoke(model: Any, inputs: tuple, kwargs: dict) -> tuple:
    """A text-only invoke as the tokenizer's encoding: PaliGemma's processor refuses text without an image.

    Without ``token_type_ids`` the text model stays causal; an invoke with an image goes to the processor unchanged.
    """
    from nnsight.modeling.processing import PROCESSOR_MEDIA_KEYS

    first = inputs[0] if inputs else None
    if isinstance(first, str):
        prompts: str | list[str] = first
    elif isinstance(first, (list, tuple)) and first and all(isinstance(p, str) for p in first):
        prompts = list(first)
    else:
        return inputs, kwargs
    if set(kwargs) & PROCESSOR_MEDIA_KEYS:
        return inputs, kwargs
    encoding = model.tokenizer(prompts, return_token_type_ids=False)
    return (dict(encoding), *inputs[1:]), kwargs


FAMILY = VisionFamily(
    name="paligemma",
    model_types=("paligemma",),
    # the same paths as LLaVA's: SigLIP's names are CLIP's
    rename=llava.FAMILY.rename,
    envoys={
        SiglipVisionModel: SiglipVision,
        **SIGLIP_BLOCKS,
        "projector": Projector,
        PaliGemmaModel: ImageScatter,
        # PaliGemma 2's text blocks, by type (types are tried before the default's paths)
        Gemma2DecoderLayer: SandwichLayer,
        Gemma2Attention: PostNormAttention,
        Gemma2MLP: PostNormMlp,
        **default.FAMILY.envoys,
    },
    prepare_invoke=prepare_invoke,
    # PaliGemma 2's logits; plain where no cap is set
    project_on_vocab=softcapped,
    tiny={"paligemma": TINY},
)
