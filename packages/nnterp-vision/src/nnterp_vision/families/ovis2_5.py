"""Ovis2.5: VideoLLaMA3's packed SigLIP-named tower in windows, a projector that embeds a distribution over visual words,
and a Qwen3 text model, under PerceptionLM's wrapper layout.

A diff of VideoLLaMA3: the tower (``model.vision``, native
``model.model.vision_tower``) embeds each patch (one frame deep) with a 2D
convolution plus learned positions resampled to the image's grid, permutes
the merge blocks into attention windows of ``window_size`` pixels at entry,
and runs its blocks, ``window_attention`` ones per window and
``full_attention`` ones per image, one interface call each (``PER_IMAGE``).
The projector (``model.projector``, native ``multi_modal_projector``) takes
the last block's output as the blocks hold it, in window order (the
wrapper reads ``hidden_states[-1]``), folds each 2 x 2 merge block into one
row, maps it to logits over a visual vocabulary (``visual_tokenizer``: a
linear, a LayerNorm), softmaxes them, and multiplies the distribution
(padded with zeros for the four indicator words) into an embedding table
(``visual_embeddings_table``): one row per image token, the text's width.
``Ovis2_5Model._merge_visual_features`` scatters those rows at the image
tokens, then writes the table's indicator rows at each image's start and end
tokens (not image tokens, so ``image_features`` is what the image tokens
receive). The tower's ``last_hidden_state`` (its ``post_layernorm`` over the
stream restored to merge-block order) is read by nothing downstream:
``tower_output`` says so. The text blocks are Qwen3's (the default family).
"""

from nnterp.families import default

from transformers.models.ovis2_5.modeling_ovis2_5 import (
    Ovis2_5Model,
    Ovis2_5MultiModalProjector,
    Ovis2_5VisionAttention,
    Ovis2_5VisionEncoderLayer,
    Ovis2_5VisionMLP,
    Ovis2_5VisionModel,
)

from ..components import ImageScatter
from ..components.paddleocr_vl import PaddleOcrVision
from ..components.projector import Selected, hidden_state
from ..components.qwen import QwenMerger, QwenVisionAttention, QwenVisionLayer, QwenVisionMlp, packed
from ..components.vision import Vision
from ..family import VisionFamily
from ..tiny.ovis2_5 import TINY
from . import llava, video_llama_3

#: why no gradient of the logits reaches Ovis2.5's tower_output
UNREAD = (
    "the tower's last_hidden_state (post_layernorm over the last block's stream, restored to merge-block order) is "
    "read by nothing downstream: the projector takes the last block's output itself (hidden_states[-1]), in window "
    "order and before post_layernorm"
)
#: what to write instead
WRITE_INSTEAD = "; to change what the projector takes, write vision.layers[-1].layer_output"


class OvisVision(PaddleOcrVision):
    """Ovis2.5's tower: PaddleOCR-VL's packed SigLIP-named ViT, its merge blocks in windows, its final norm unread."""

    tower_output = packed(Vision.tower_output.at(off_the_graph=UNREAD, read_only=UNREAD + WRITE_INSTEAD))

    @property
    def window_size(self) -> int | None:
        """Side of an attention window in pixels, for the blocks of ``layer_types`` ``window_attention``."""
        return int(self._config.window_size) if "window_attention" in (self._config.layer_types or ()) else None


class VisualTokenizer(QwenMerger):
    """Ovis2.5's projector (``model.projector``): each merge block folded into a row, a distribution over visual words,
    and the embedding table it weighs.

    It takes the last block's output as the blocks hold it, ``[patches,
    vision_hidden_size]`` in window order, and returns ``[image_tokens,
    hidden_size]``: what the wrapper scatters (split per image and joined
    back), so ``projector_output == vision.image_features``.
    """

    def selection(self) -> tuple[Selected, ...]:
        """The last block's ``layer_output``: the wrapper hands the projector the tower's ``hidden_states[-1]``."""
        return (Selected(hidden_state(self.root.vision, -1)),)

    @property
    def projector_input_size(self) -> int:
        """Width of the projector's input: the tower's (its linear takes ``spatial_merge_size ** 2`` rows side by side)."""
        return int(self._module.visual_tokenizer.linear.in_features // self._module.visual_tokenizer.spatial_merge_unit)


class VisualFeatureScatter(ImageScatter):
    """Ovis2.5's inner model: the features go in through ``self._merge_visual_features``, whose ``masked_scatter`` writes
    the projector's rows (joined back from their per-image split, cast to the embeddings' dtype) at the image tokens."""

    scatter_operation = "self__merge_visual_features_0.source.inputs_embeds_masked_scatter_0"


FAMILY = VisionFamily(
    name="ovis2_5",
    model_types=("ovis2_5",),
    rename={**llava.WRAPPER, **llava.CLIP_TOWER},
    envoys={
        Ovis2_5VisionModel: OvisVision,
        Ovis2_5VisionEncoderLayer: QwenVisionLayer,
        Ovis2_5VisionAttention: QwenVisionAttention,
        Ovis2_5VisionMLP: QwenVisionMlp,
        Ovis2_5MultiModalProjector: VisualTokenizer,
        Ovis2_5Model: VisualFeatureScatter,
        **default.FAMILY.envoys,
    },
    tiny={"ovis2_5": TINY},
    skips={"ovis2_5": video_llama_3.FAMILY.skips["video_llama_3"]},
)
