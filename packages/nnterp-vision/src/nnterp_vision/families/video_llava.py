"""Video-LLaVA: two CLIP towers (images, videos), LLaVA's projector and a Llama text model, under VideoLlavaForConditionalGeneration.

A diff of LLaVA on its image tower: ``model.vision`` is ``model.model.image_tower``
(CLIP's names aliased as on LLaVA), ``model.projector`` the shared
``multi_modal_projector``, which takes ``vision.layers[-2].layer_output``
without the class row. ``VideoLlavaModel.forward`` scatters the images
first, ``inputs_embeds.masked_scatter(special_image_mask, image_features)``
(the ``ImageScatter``'s default operation), handing the projection
``[images, 16, hidden_size]`` unflattened, so ``image_features`` is it viewed
``[image_tokens, hidden_size]`` (as ``Vision`` serves every scatter's argument). The video tower is
a ``CLIPVisionModel`` too, so the image tower and its blocks are keyed by
native path rather than type; the video tower's blocks are keyed to plain
envoys (not served: videos are not traced), so the text model's
``"layers.*"`` key does not claim them.
"""

from nnsight.intervention.envoy import Envoy
from nnterp.families import default

from transformers.models.video_llava.modeling_video_llava import VideoLlavaModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp
from ..family import VisionFamily
from ..tiny.sizes import CLIP, TEXT
from ..tiny.video_llava import VideoLlavaTinyConfig
from . import llava

IMAGE_BLOCKS = "image_tower.encoder.layers.*"
VIDEO_BLOCKS = "video_tower.encoder.layers.*"

FAMILY = VisionFamily(
    name="video_llava",
    model_types=("video_llava",),
    rename={
        **{key: value for key, value in llava.FAMILY.rename.items() if key != "model.vision_tower"},
        "model.image_tower": "vision",
    },
    # by native path: type keys would take both towers; nnsight tries path keys in order, so these come before the text's
    envoys={
        "model.image_tower": Vision,
        IMAGE_BLOCKS: VisionLayer,
        IMAGE_BLOCKS + ".self_attn": VisionAttention,
        IMAGE_BLOCKS + ".mlp": VisionMlp,
        VIDEO_BLOCKS: Envoy,
        VIDEO_BLOCKS + ".self_attn": Envoy,
        VIDEO_BLOCKS + ".mlp": Envoy,
        "projector": Projector,
        VideoLlavaModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={
        # LLaVA on its image tower (the video tower beside it); 16 image tokens per image, the class row dropped
        "video_llava": VideoLlavaTinyConfig(
            "video_llava",
            {
                "text_config": TEXT,
                "vision_config": CLIP,
                "image_token_index": 300,
                "video_token_index": 301,
                "image_seq_length": 16,
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
