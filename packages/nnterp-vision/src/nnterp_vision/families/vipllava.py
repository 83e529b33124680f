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

from transformers.models.vipllava.modeling_vipllava import VipLlavaModel

from ..components import ImageScatter, Projector
from ..components.projector import Selected
from ..family import VisionFamily
from ..tiny.sizes import CLIP, TEXT
from ..tiny.vipllava import VipLlavaTinyConfig
from . import llava


class VipLlavaProjector(Projector):
    """VipLLaVA's projector: each ``vision_feature_layer`` hidden state without its class row, side by side (its config has no select strategy)."""

    def selection(self) -> tuple[Selected, ...] | str:
        """The hidden states of ``vision_feature_layer``, in order, each with the class row dropped."""
        selected = super().selection()
        if isinstance(selected, str):
            return selected
        return tuple(Selected(chosen.value, 1) for chosen in selected)


FAMILY = VisionFamily(
    name="vipllava",
    model_types=("vipllava",),
    rename=llava.FAMILY.rename,
    # LLaVA's, with VipLlavaModel as the scatter
    envoys={**llava.CLIP_ENVOYS, "projector": VipLlavaProjector, VipLlavaModel: ImageScatter, **default.FAMILY.envoys},
    tiny={
        # two tower layers side by side into the projector (hidden_states[-2] and [0]); 16 image tokens
        "vipllava": VipLlavaTinyConfig(
            "vipllava",
            {
                "text_config": TEXT,
                "vision_config": CLIP,
                "image_token_id": 300,
                "image_seq_length": 16,
                "vision_feature_layer": [-2, 0],
            },
            load={"attn_implementation": "eager"},
        ),
    },
)
