"""PerceptionLM: a Perception Encoder tower (timm's Eva ViT), a two-layer projector that pools, and a Llama text model.

A diff of LLaVA: the tower is a ``TimmWrapperModel`` around timm's ``Eva``
(``vision_tower.timm_model``), a ViT of pre-norm blocks with rotary position
embeddings and a layer scale after each sublayer, so its blocks keep the text
blocks' identities (``TimmAttention``, ``TimmMlp``: each contribution read
after its layer scale). The processor cuts every image into tiles (a
thumbnail and its grid of tiles, ``vision_input_type="thumb+tile"``), and the
tower runs one row per tile: ``Patches`` is ``[tiles, 1 + patches,
vision_hidden_size]``, the class row first. The wrapper drops the class row
(``vision_use_cls_token``), and the projector (``linear_1``, GELU,
``linear_2``) projects each patch, then average-pools each tile's patch grid
by ``projector_pooling_ratio``: ``projector_output`` is ``[tiles,
patches / ratio ** 2, hidden_size]``, scattered as it is into the image tokens
(``inputs_embeds.masked_scatter``, the first of the two: the second is
video's). Load with ``attn_implementation="eager"`` to read the tower's pattern.
"""

from nnterp.families import default

from timm.layers import AttentionRope, Mlp
from timm.models.eva import EvaBlock
from transformers.models.perception_lm.modeling_perception_lm import PerceptionLMModel
from transformers.models.timm_wrapper.modeling_timm_wrapper import TimmWrapperModel

from ..components import ImageScatter, Projector, Vision, VisionLayer
from ..components.projector import Selected
from ..components.timm import TimmAttention, TimmMlp, TimmVision
from ..family import VisionFamily
from ..tiny.perception_lm import TINY
from . import llava


class PerceptionLMProjector(Projector):
    """PerceptionLM's projector: it takes the tower's ``last_hidden_state``, the class row dropped where the config's ``vision_use_cls_token`` says the tower has one."""

    def selection(self) -> tuple[Selected, ...]:
        """``tower_output``, its first row dropped under ``vision_use_cls_token``."""
        return (Selected(Vision.tower_output.name, 1 if self.root._module.config.vision_use_cls_token else 0),)


FAMILY = VisionFamily(
    name="perception_lm",
    model_types=("perception_lm",),
    rename={
        **llava.WRAPPER,
        # the timm model's modules, under the standard names
        "timm_model.blocks": "layers",
        "timm_model.patch_embed": "patch_embed",
        "norm1": "input_layernorm",
        "norm2": "post_attention_layernorm",
        "attn": "self_attn",
        "attn.proj": "attn.o_proj",
        "fc1": "up_proj",
        "fc2": "down_proj",
        "mlp.act": "mlp.act_fn",
    },
    envoys={
        TimmWrapperModel: TimmVision,
        EvaBlock: VisionLayer,
        AttentionRope: TimmAttention,
        Mlp: TimmMlp,
        "projector": PerceptionLMProjector,
        PerceptionLMModel: ImageScatter,
        **default.FAMILY.envoys,
    },
    # timm reads values while it builds the tower (drop-path rates with .item()), which a meta build refuses: load dispatched
    load_defaults={"dispatch": True},
    tiny={"perception_lm": TINY},
    skips={
        "perception_lm": {
            "vision_interior_feeds_the_output": "timm's attention splits one qkv projection and applies its rotary",
            "vision_scores_are_queries_against_keys": "timm's attention splits one qkv projection and applies its rotary",
            "vision_head_outputs_are_pattern_against_values": "timm's attention splits one qkv projection and applies its rotary",
        },
    },
)
