"""LLaVA: a CLIP tower, a two-layer projector and a Llama text model, under LlavaForConditionalGeneration.

The text model keeps every standard name (``model.layers[i]`` ...); the tower
is ``model.vision``, its blocks ``model.vision.layers[i]``, whose CLIP names
(``layer_norm1``, ``out_proj``, ``fc1`` ...) are aliased to the standard ones;
the projector is ``model.projector``. ``LlavaModel.forward`` runs the tower
and scatters the projected features into the token embeddings, so it is the
``ImageScatter``. Load it with a processor (``TASK``) and trace with
``model.trace(prompt, images=[image])``, the prompt holding ``<image>``.
"""

from types import ModuleType

from nnterp.families import default
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPEncoderLayer, CLIPMLP, CLIPVisionModel
from transformers.models.llava.modeling_llava import LlavaModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp

#: the task to load with: the processor, so images reach the model
TASK = "image-text-to-text"

RENAME = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
    # the tower's modules, under the standard names
    "encoder.layers": "layers",
    "embeddings.patch_embedding": "patch_embed",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
    "out_proj": "o_proj",
    "fc1": "up_proj",
    "fc2": "down_proj",
    "activation_fn": "act_fn",
}

#: the tower's by module type: nnsight tries types before paths, and "layers.*" matches the tower's native path too
ENVOYS = {
    CLIPVisionModel: Vision,
    CLIPEncoderLayer: VisionLayer,
    CLIPAttention: VisionAttention,
    CLIPMLP: VisionMlp,
    "projector": Projector,
    LlavaModel: ImageScatter,
    **default.ENVOYS,
}


def for_config(config: dict) -> ModuleType | None:
    """``llava_pixtral`` where the tower is Pixtral's (Pixtral 12B): its modules have other names; this module else."""
    if (config.get("vision_config") or {}).get("model_type") == "pixtral":
        from . import llava_pixtral

        return llava_pixtral
    return None
