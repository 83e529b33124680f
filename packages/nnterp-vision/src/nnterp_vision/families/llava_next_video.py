"""LLaVA-NeXT-Video: LLaVA-NeXT's CLIP tower, anyres packing and Llama text model, with a video path beside, under LlavaNextVideoForConditionalGeneration.

A diff of LLaVA-NeXT: images take exactly LLaVA-NeXT's path (a base crop
and the anyres tiles through the tower and projector, packed with
``image_newline`` rows into ``image_features``); ``LlavaNextVideoModel.forward``
scatters images, then videos (their frames pooled by ``vision_resampler``),
so the image scatter is its first ``inputs_embeds.masked_scatter``, the
``ImageScatter``'s default. Videos are not served (``image_features`` is
the image scatter's only; the frames' pooled features are not mapped).
"""

from nnterp.families import default
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPEncoderLayer, CLIPMLP, CLIPVisionModel
from transformers.models.llava_next_video.modeling_llava_next_video import LlavaNextVideoModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp
from .llava_next import RENAME, TASK  # noqa: F401 - the same paths

#: LLaVA-NeXT's, with LlavaNextVideoModel as the scatter
ENVOYS = {
    CLIPVisionModel: Vision,
    CLIPEncoderLayer: VisionLayer,
    CLIPAttention: VisionAttention,
    CLIPMLP: VisionMlp,
    "projector": Projector,
    LlavaNextVideoModel: ImageScatter,
    **default.ENVOYS,
}
