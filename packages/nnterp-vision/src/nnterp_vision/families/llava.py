"""LLaVA: a CLIP tower, a two-layer projector and a Llama text model, under LlavaForConditionalGeneration.

The text model keeps every standard name (``model.layers[i]`` ...); the tower
is ``model.vision``, its blocks ``model.vision.layers[i]``, whose CLIP names
(``layer_norm1``, ``out_proj``, ``fc1`` ...) are aliased to the standard ones;
the projector is ``model.projector``. ``LlavaModel.forward`` runs the tower
and scatters the projected features into the token embeddings, so it is the
``ImageScatter``. Load it with a processor (the family's ``task``) and trace with
``model.trace(prompt, images=[image])``, the prompt holding ``<image>``.
"""

from nnterp.families import default

from transformers.models.clip.modeling_clip import CLIPMLP, CLIPAttention, CLIPEncoderLayer, CLIPVisionModel
from transformers.models.llava.modeling_llava import LlavaModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp
from ..family import VisionFamily
from ..tiny import VisionTinyConfig
from ..tiny.sizes import CLIP, TEXT

#: the wrapper's paths: the text model's at the root, the tower as vision, the projector (shared by LLaVA's kin)
WRAPPER = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}
#: CLIP's tower modules, under the standard names (SigLIP's and Idefics3's are CLIP's)
CLIP_TOWER = {
    "encoder.layers": "layers",
    "embeddings.patch_embedding": "patch_embed",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
    "out_proj": "o_proj",
    "fc1": "up_proj",
    "fc2": "down_proj",
    "activation_fn": "act_fn",
}
#: CLIP's tower by module type: nnsight tries types before paths, and "layers.*" matches the tower's native path too
CLIP_ENVOYS = {
    CLIPVisionModel: Vision,
    CLIPEncoderLayer: VisionLayer,
    CLIPAttention: VisionAttention,
    CLIPMLP: VisionMlp,
}


def for_config(config: dict) -> VisionFamily | None:
    """``llava_pixtral`` where the tower is Pixtral's (Pixtral 12B): its modules have other names; this family else."""
    if (config.get("vision_config") or {}).get("model_type") == "pixtral":
        from . import llava_pixtral

        return llava_pixtral.FAMILY
    return None


FAMILY = VisionFamily(
    name="llava",
    model_types=("llava",),
    rename={**WRAPPER, **CLIP_TOWER},
    envoys={**CLIP_ENVOYS, "projector": Projector, LlavaModel: ImageScatter, **default.FAMILY.envoys},
    for_config=for_config,
    tiny={
        # the image token follows the tokenizer's 300 entries; 16 image tokens, one per patch (the class row dropped)
        "llava": VisionTinyConfig(
            "llava",
            {"text_config": TEXT, "vision_config": CLIP, "image_token_id": 300, "image_seq_length": 16},
            load={"attn_implementation": "eager"},
        ),
    },
)
