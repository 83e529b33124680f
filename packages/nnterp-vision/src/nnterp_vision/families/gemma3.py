"""Gemma 3: a SigLIP tower, a pooling projector and a Gemma 3 text model, under Gemma3ForConditionalGeneration.

A diff of PaliGemma: the same SigLIP tower (``tower_output`` is its normed
``last_hidden_state``, every patch), but the projector is no linear layer: it
lays the patches out on their grid, average-pools them to
``mm_tokens_per_image`` tokens, RMS-norms them (``mm_soft_emb_norm``) and
multiplies by ``mm_input_projection_weight``. So ``projector.projector_input``
is ``tower_output`` (``[images, patches, vision_hidden_size]``) and
``projector.projector_output`` holds ``mm_tokens_per_image`` rows per image,
not one per patch; each is read where it is, at the projector's input and
output. ``Gemma3Model.forward`` scatters that output into the token
embeddings (the ``ImageScatter``), and Gemma 3 scales its token embeddings
inside ``embed_tokens``, so the scattered features are what ``layers[0]``
receives. The text model is Gemma 3's: Gemma-2's sandwich block
(nnterp-text's, by the ``gemma3_text`` model type), softcapped logits where the config sets a cap.

The prompt's image placeholder is ``<start_of_image>``
(``processor.image_token``); the processor expands it to the begin token,
``mm_tokens_per_image`` image tokens (``image_token_id``) and the end token,
and the text model's mask lets an image's tokens attend to each other both
ways (``token_type_ids``), causal elsewhere. Text alone goes through the processor too.
"""

from transformers.models.gemma3.modeling_gemma3 import Gemma3Model
from transformers.models.siglip.modeling_siglip import SiglipVisionModel

from ..components import ImageScatter, Projector
from ..components.siglip import SiglipVision
from ..family import VisionFamily
from ..tiny.gemma3 import TINY
from . import llava
from .paligemma import SIGLIP_BLOCKS


class PoolingProjector(Projector):
    """Gemma 3's projector: pool the patch grid, RMS-norm, project; no linear layer, a projection matrix."""

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input: the rows of ``mm_input_projection_weight`` (the tower's width)."""
        return int(self._module.mm_input_projection_weight.shape[0])


FAMILY = VisionFamily(
    name="gemma3",
    model_types=("gemma3",),
    # the same paths as LLaVA's: SigLIP's names are CLIP's
    rename=llava.FAMILY.rename,
    envoys={SiglipVisionModel: SiglipVision, **SIGLIP_BLOCKS, "projector": PoolingProjector, Gemma3Model: ImageScatter},
    # the text blocks, components and softcapped logits: Gemma 3's text family's
    text_family="gemma3_text",
    tiny={"gemma3": TINY},
)
