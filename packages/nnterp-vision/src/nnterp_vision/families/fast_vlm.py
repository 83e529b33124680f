"""FastVLM: a FastViT-MCi3 tower (timm, convolutional then attention stages), a two-layer projector and a Qwen2 text model.

A diff of LLaVA: the tower is a ``TimmWrapperModel`` around timm's
``FastVit`` (``vision_tower.timm_model``), a hybrid network that returns a
feature map, not a stream of patches: a stem, three stages of RepMixer blocks
(depthwise convolutions) and two of attention blocks over the map with
convolutional MLPs, each stage halving the map and changing its width, then
``final_conv``. So ``tower_output`` is the last map viewed one row per
position (``[images, rows * columns, vision_hidden_size]``), which is how
``FastVlmModel`` flattens it for the projector, and ``patch_embeddings`` the
stem's map viewed the same way; the blocks' values are unavailable (``BLOCKS``),
and the checks that need them skip. The projector (``linear_1``, GELU,
``linear_2``) maps every position to one image token;
``FastVlmModel.forward`` scatters its output into the token embeddings
(``inputs_embeds.masked_scatter``): the ``ImageScatter``. The processor is
LLaVA's: ``<image>`` becomes one token per position of the last map.
"""

from nnterp.families import default

from timm.models.fastvit import AttentionBlock, RepMixerBlock
from transformers.models.fast_vlm.modeling_fast_vlm import FastVlmModel
from transformers.models.timm_wrapper.modeling_timm_wrapper import TimmWrapperModel

from ..components import ImageScatter, Projector, Vision
from ..components.projector import Selected
from ..components.timm import ConvBlock, ConvTimmVision
from ..tiny.fast_vlm import TINY
from . import llava, perception_lm

#: why FastViT's blocks serve no block values
BLOCKS = (
    "FastViT's blocks run on a 2D feature map whose width changes from stage to stage, and its RepMixer blocks fold "
    "their token mixing into the residual (x = mixer(x)): no one [images, patches, vision_hidden_size] stream, nor a "
    "contribution, for a block value"
)


class FastVlmProjector(Projector):
    """FastVLM's projector: it takes the tower's last feature map one row per position, whatever ``vision_feature_layer`` says (only -1 is supported)."""

    def selection(self) -> tuple[Selected, ...]:
        """``tower_output``: the last feature map, ``[images, rows * columns, channels]``."""
        return (Selected(Vision.tower_output.name),)


class FastVitBlock(ConvBlock):
    """A FastViT block, RepMixer or attention: its values unavailable (``BLOCKS``)."""

    BLOCKS = BLOCKS


#: PerceptionLM's kin: a timm tower, so loaded dispatched as it is; FastViT's names and blocks
FAMILY = perception_lm.FAMILY.replace(
    name="fast_vlm",
    model_types=("fast_vlm",),
    rename={**llava.WRAPPER, "timm_model.stem": "patch_embed"},
    envoys={
        TimmWrapperModel: ConvTimmVision,
        RepMixerBlock: FastVitBlock,
        AttentionBlock: FastVitBlock,
        "projector": FastVlmProjector,
        FastVlmModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # every image 128 pixels, its 2 x 2 last feature map 4 image tokens
    tiny={"fast_vlm": TINY},
    skips={
        "fast_vlm": {
            "vision_contribution": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_interior_feeds_the_output": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_pattern_is_softmax_of_scores": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_scores_are_queries_against_keys": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_head_outputs_are_pattern_against_values": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_mid_stream": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_neurons_make_contribution": "FastViT's blocks run on a 2D feature map whose width changes from stage",
            "vision_norm_outputs_feed_the_sublayers": "FastViT's blocks run on a 2D feature map whose width changes from stage",
        },
    },
)
