"""VideoLLaMA3: a packed SigLIP-named ViT with a per-image downsample, a two-layer projector and a Qwen2 text model.

A diff of PaddleOCR-VL: the tower (``model.vision``, native
``model.model.vision_model``, a ``VideoLlama3Vision``) runs every image's
patches in one row and attends per image (``PER_IMAGE``), its SigLIP names
aliased as on LLaVA (its blocks at ``encoder.layers``, directly under it); its
final norm is ``tower_output``, after which it resamples each image's grid by
the processor's merge size. The projector (``model.projector``, its
``readout`` two linears around a GELU) maps those rows to the text width, one
per image token; ``VideoLlama3Model.forward`` scatters them (the
``ImageScatter``). The text model is Qwen2's (built from the config), the
default block on 1D positions. The processor's video processor needs torchvision.
"""

from nnterp.families import default

from transformers.models.video_llama_3.modeling_video_llama_3 import (
    VideoLlama3Model,
    VideoLlama3VisionAttention,
    VideoLlama3VisionEncoderLayer,
    VideoLlama3VisionMLP,
    VideoLlama3VisionModel,
)
from transformers.models.video_llama_3.modeling_video_llama_3 import VideoLlama3Projector as NativeProjector

from ..components import ImageScatter
from ..components.qwen import QwenVisionAttention, QwenVisionLayer, QwenVisionMlp
from ..components.video_llama_3 import VideoLlama3Projector, VideoLlama3Vision
from ..family import VisionFamily
from ..tiny.video_llama_3 import TINY
from . import llava
from .qwen2_vl import QWEN_WRAPPER

FAMILY = VisionFamily(
    name="video_llama_3",
    model_types=("video_llama_3",),
    # the text model as on Qwen2-VL; the tower's SigLIP names as on LLaVA (their wrapper paths left out)
    rename={
        **{native: standard for native, standard in QWEN_WRAPPER.items() if not native.startswith("model.visual")},
        **llava.CLIP_TOWER,
        "model.vision_model": "vision",
        "model.projector": "projector",
    },
    envoys={
        VideoLlama3VisionModel: VideoLlama3Vision,
        VideoLlama3VisionEncoderLayer: QwenVisionLayer,
        VideoLlama3VisionAttention: QwenVisionAttention,
        VideoLlama3VisionMLP: QwenVisionMlp,
        NativeProjector: VideoLlama3Projector,
        VideoLlama3Model: ImageScatter,
        **default.FAMILY.envoys,
    },
    tiny={"video_llama_3": TINY},
    skips={
        "video_llama_3": {
            "vision_pattern_is_softmax_of_scores": "this packed tower's attention",
            "vision_scores_are_queries_against_keys": "this packed tower's attention",
            "vision_head_outputs_are_pattern_against_values": "this packed tower's attention",
        },
    },
)
