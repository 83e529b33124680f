"""ZAYA: a block that rescales the residual stream itself, and routes with a state carried from block to block.

Each sublayer is added through ``ResidualScaling``: ``(out + b) * s + (x + b') * s'``
with learned ``s, s', b, b'``, so the stream is not ``x`` plus something the
sublayer made, and neither sublayer has a contribution. The block returns
``(stream, router state)``; a skipped block hands on the router state it received.
"""

from nnterp import Attention, Mlp, unavailable
from nnterp.families import default

from nnterp_text.families.glm_moe_dsa import CarryingLayer

RESCALED = (
    "ZAYA's ResidualScaling adds {0} as (out + b) * s + (stream + b') * s', rescaling the stream itself: "
    "no tensor is what {0} adds to the stream; read {1}"
)


class ZayaLayer(CarryingLayer):
    carried = ("prev_router_hidden_states", 1)


class ZayaAttention(Attention):
    attention_output = unavailable(
        RESCALED.format("the attention", "self_attn.output and post_attention_residual_scale natively")
    )


class ZayaMlp(Mlp):
    mlp_output = unavailable(RESCALED.format("the MLP", "mlp.output and post_mlp_residual_scale natively"))


RENAME = default.RENAME
ENVOYS = {**default.ENVOYS, "layers.*": ZayaLayer, "layers.*.self_attn": ZayaAttention, "layers.*.mlp": ZayaMlp}
