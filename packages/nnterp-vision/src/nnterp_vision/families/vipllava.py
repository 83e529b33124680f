"""VipLLaVA: LLaVA's CLIP tower and Llama text model, its projector over several tower layers at once.

The tree is LLaVA's (``model.vision``, ``model.projector``, the text model's
standard names). ``VipLlavaModel`` takes the tower's hidden states at each of
the config's ``vision_feature_layer`` indices, drops the class row from each
and concatenates them along the width, so ``projector.projector_input`` is
``[images, patches, len(vision_feature_layer) * vision_hidden_size]``; the
projector normalizes it (``projector_layernorm``) before its two linear
layers. The projection reaches the tokens unchanged through the same
``inputs_embeds.masked_scatter``, but unflattened: the scatter receives
``[images, patches, hidden_size]``, which ``image_features`` serves one row
per image token, as a view (as ``Vision`` does every scatter's argument).
"""

from nnterp.families import default
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPEncoderLayer, CLIPMLP, CLIPVisionModel
from transformers.models.vipllava.modeling_vipllava import VipLlavaModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp
from .llava import RENAME, TASK

__all__ = ["ENVOYS", "RENAME", "TASK"]

#: LLaVA's, with VipLlavaModel as the scatter
ENVOYS = {
    CLIPVisionModel: Vision,
    CLIPEncoderLayer: VisionLayer,
    CLIPAttention: VisionAttention,
    CLIPMLP: VisionMlp,
    "projector": Projector,
    VipLlavaModel: ImageScatter,
    **default.ENVOYS,
}
