"""Idefics2: Idefics3's tower, a perceiver-resampler connector and a Mistral text model, under Idefics2ForConditionalGeneration.

A diff of Idefics3: the same names (``model.text_model`` renamed to the
standard ones, the tower ``model.vision``, an ``Idefics2VisionTransformer``
with SigLIP's modules under CLIP's names, its ``post_layernorm`` over every
patch, so ``tower_output`` is what the connector takes), the same scatter
(``Idefics2Model.forward`` hands ``self.inputs_merger`` the connector's
output flattened as ``image_hidden_states``: a ``MergerScatter``). The
connector (``model.projector``) differs: a gated MLP to the text width, then
a perceiver resampler whose ``resampler_n_latents`` learned latents
cross-attend to the patches, so each image is that many tokens
(``PerceiverConnector``). The resampler's blocks sit at
``connector.perceiver_resampler.layers``: they are keyed to plain envoys by
type, so the text model's ``"layers.*"`` key does not claim them (not served).
The processor writes ``<fake_token_around_image>``, ``image_seq_len``
``<image>`` tokens and ``<fake_token_around_image>`` for each ``<image>``.
"""

from nnsight.intervention.envoy import Envoy
from nnterp.families import default

from transformers.models.idefics2.modeling_idefics2 import (
    Idefics2Connector,
    Idefics2EncoderLayer,
    Idefics2MLP,
    Idefics2Model,
    Idefics2PerceiverAttention,
    Idefics2PerceiverLayer,
    Idefics2VisionAttention,
    Idefics2VisionMLP,
    Idefics2VisionTransformer,
)

from ..components import Vision, VisionAttention, VisionLayer, VisionMlp
from ..components.idefics2 import PerceiverConnector
from ..components.idefics3 import MergerScatter
from ..tiny.idefics2 import TINY
from . import idefics3

FAMILY = idefics3.FAMILY.replace(
    name="idefics2",
    model_types=("idefics2",),
    envoys={
        Idefics2VisionTransformer: Vision,
        Idefics2EncoderLayer: VisionLayer,
        Idefics2VisionAttention: VisionAttention,
        Idefics2VisionMLP: VisionMlp,
        Idefics2Connector: PerceiverConnector,
        Idefics2Model: MergerScatter,
        # the resampler's blocks and the connector's gated MLPs: plain, before the text model's path keys
        Idefics2PerceiverLayer: Envoy,
        Idefics2PerceiverAttention: Envoy,
        Idefics2MLP: Envoy,
        **default.FAMILY.envoys,
    },
    tiny={"idefics2": TINY},
)
