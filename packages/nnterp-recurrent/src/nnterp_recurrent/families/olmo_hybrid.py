"""OLMo-Hybrid: gated DeltaNet blocks (pre-norm) between OLMo-2's post-norm attention blocks.

The two kinds of block are two classes, so they are keyed by type: an
attention block is OLMo-2's (the attention and the MLP read the stream, and
the contributions are the post norms' outputs), a DeltaNet block the default
pre-norm block. The MLP module is one class in both, so its contribution is
read where its block puts it. With ``linear_allow_neg_eigval`` the betas are
doubled, into (0, 2).
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import Layer, Mlp, PostNormAttention, PostNormLayer
from nnterp.families import default
from nnterp.tiny import TinyConfig

from transformers.models.olmo_hybrid import modeling_olmo_hybrid as modeling

from ..components import LinearAttention
from ..family import RecurrentFamily
from ..tiny import DELTANET


class OlmoHybridMlp(Mlp):
    """The MLP of either kind of block: on an attention block its contribution is the post norm's output."""

    mlp_output = Mlp.mlp_output.at(
        lambda envoy: (
            "../post_feedforward_layernorm.output"
            if "post_feedforward_layernorm" in envoy.parent.__dict__
            else "output"
        ),
        select=None,
    )


class OlmoHybridDeltaNet(LinearAttention):
    """OLMo-Hybrid's gated DeltaNet: betas doubled where the config allows negative eigenvalues."""

    @property
    def BETA_RANGE(self) -> tuple[float, float]:  # type: ignore[override]  # per model, from its config; the base's is a constant
        return (0.0, 2.0) if self._module.allow_neg_eigval else (0.0, 1.0)


FAMILY = RecurrentFamily(
    name="olmo_hybrid",
    model_types=("olmo_hybrid",),
    modeling=(modeling.__name__,),
    rename=default.FAMILY.rename,
    envoys={
        modeling.OlmoHybridAttentionDecoderLayer: PostNormLayer,
        modeling.OlmoHybridLinearAttentionDecoderLayer: Layer,
        "layers.*.self_attn": PostNormAttention,
        "layers.*.linear_attn": OlmoHybridDeltaNet,
        "layers.*.mlp": OlmoHybridMlp,
    },
    tiny={
        # betas doubled into (0, 2), the config's default
        "olmo_hybrid": TinyConfig("olmo_hybrid", DELTANET),
        # betas a plain sigmoid, in (0, 1)
        "olmo_hybrid-sigmoid": TinyConfig("olmo_hybrid", {**DELTANET, "linear_allow_neg_eigval": False}),
    },
)
