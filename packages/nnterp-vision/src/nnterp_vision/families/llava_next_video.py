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

from transformers.models.llava_next_video.modeling_llava_next_video import LlavaNextVideoModel

from ..components import ImageScatter, Projector
from ..family import VisionFamily
from ..tiny.llava_next_video import LlavaNextVideoTinyConfig
from ..tiny.sizes import CLIP, TEXT
from . import llava, llava_next

FAMILY = VisionFamily(
    name="llava_next_video",
    model_types=("llava_next_video",),
    rename=llava_next.FAMILY.rename,
    # LLaVA-NeXT's, with LlavaNextVideoModel as the scatter
    envoys={**llava.CLIP_ENVOYS, "projector": Projector, LlavaNextVideoModel: ImageScatter, **default.FAMILY.envoys},
    tiny={
        # LLaVA-NeXT's checkpoint with a video token (301) and processor; the checks' image is 70 image tokens
        "llava_next_video": LlavaNextVideoTinyConfig(
            "llava_next_video",
            {
                "text_config": TEXT,
                "vision_config": CLIP,
                "image_token_id": 300,
                "video_token_id": 301,
                "image_grid_pinpoints": [[32, 64], [64, 32], [64, 64]],
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
