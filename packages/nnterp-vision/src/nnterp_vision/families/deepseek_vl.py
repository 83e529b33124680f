"""DeepSeek-VL: a SigLIP tower, a two-layer MLP aligner and a Llama text model, under DeepseekVLForConditionalGeneration.

A diff of PaliGemma: the same SigLIP tower (``model.vision``, native
``model.model.vision_model``; no class row, its ``post_layernorm`` norms
every patch, so ``tower_output`` is exactly what the aligner takes), but the
projector is LLaVA's shape, ``linear1``, GELU, ``linear2``
(``model.projector``, native ``model.model.aligner``), one row per patch.
``DeepseekVLModel.forward`` flattens the aligner's output to
``[image_tokens, hidden_size]`` before ``inputs_embeds.masked_scatter``, so
it is the ``ImageScatter`` and ``image_features`` is that argument as it is
(no view, unlike PaliGemma). The processor writes ``num_image_tokens`` image
tokens for each image placeholder (``processor.image_token``), one per patch.
"""

from nnterp.families import default

from transformers.models.deepseek_vl.modeling_deepseek_vl import DeepseekVLModel
from transformers.models.siglip.modeling_siglip import SiglipVisionModel

from ..components import ImageScatter, Projector, Vision
from ..family import VisionFamily
from ..tiny.deepseek_vl import TINY
from . import llava
from .paligemma import SIGLIP_BLOCKS

FAMILY = VisionFamily(
    name="deepseek_vl",
    model_types=("deepseek_vl",),
    # LLaVA's names (SigLIP's are CLIP's), the tower and the aligner at their own paths
    rename={
        **{
            key: value
            for key, value in llava.FAMILY.rename.items()
            if key not in ("model.vision_tower", "model.multi_modal_projector")
        },
        "model.vision_model": "vision",
        "model.aligner": "projector",
    },
    # the tower's by module type, as on PaliGemma; its scatter takes the aligner's rows already flattened
    envoys={
        SiglipVisionModel: Vision,
        **SIGLIP_BLOCKS,
        "projector": Projector,
        DeepseekVLModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # a SigLIP tower's 16 patches through an MLP aligner, 16 image tokens per image
    tiny={"deepseek_vl": TINY},
)
