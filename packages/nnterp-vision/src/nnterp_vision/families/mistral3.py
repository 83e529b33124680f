"""Mistral 3: a Pixtral tower, a patch-merging projector and a Mistral text model, under Mistral3ForConditionalGeneration.

A diff of LLaVA: the tower is ``model.vision``, a ``PixtralVision`` (packed:
every image's patches in one row ``[1, all patches, vision_hidden_size]``
under a block-diagonal mask), its blocks ``model.vision.layers[i]`` with
Pixtral's names (``attention_norm``, ``attention``, ``ffn_norm``,
``feed_forward`` ...) aliased to the standard ones; the projector
(``model.projector``) merges each ``spatial_merge_size`` square of patches
into one image token. ``Mistral3Model.forward`` runs the tower and scatters
the projected features into the token embeddings, so it is the
``ImageScatter``. The processor marks each image row with ``[IMG]`` tokens
and an ``[IMG_BREAK]`` (the last an ``[IMG_END]``); ``image_token_mask`` is
the ``[IMG]`` tokens alone, the ones that receive features.
"""

from nnterp.families import default
from transformers.models.mistral3.modeling_mistral3 import Mistral3Model, Mistral3MultiModalProjector
from transformers.models.pixtral.modeling_pixtral import PixtralAttention, PixtralAttentionLayer, PixtralMLP, PixtralVisionModel

from ..components import ImageScatter, VisionAttention, VisionLayer, VisionMlp
from ..components.pixtral import PatchMergerProjector, PixtralVision

#: the task to load with: the processor, so images reach the model
TASK = "image-text-to-text"

#: Pixtral's tower names, under the standard ones (shared with LLaVA on a Pixtral tower)
PIXTRAL_RENAME = {
    "transformer.layers": "layers",
    "patch_conv": "patch_embed",
    "attention_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attention": "self_attn",
    "feed_forward": "mlp",
}

RENAME = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
    **PIXTRAL_RENAME,
}

#: the tower's by module type, as on LLaVA: "layers.*" matches the tower's native path too
PIXTRAL_ENVOYS = {
    PixtralVisionModel: PixtralVision,
    PixtralAttentionLayer: VisionLayer,
    PixtralAttention: VisionAttention,
    PixtralMLP: VisionMlp,
}

ENVOYS = {
    **PIXTRAL_ENVOYS,
    Mistral3MultiModalProjector: PatchMergerProjector,
    Mistral3Model: ImageScatter,
    **default.ENVOYS,
}
